"""tokenplane.engine: the simulated vLLM-like engine.

Modules:
    profiles    EngineProfile, get_profile(), profile_names(): step-time constants and
                KV-cache sizes with their sources
    kv_cache    KVCache: paged blocks, prefix cache over block hashes, LRU eviction,
                optional host-DRAM second tier (HBM -> host -> gone)
    core        Engine, EngineRequest, StepResult, FinishedRequest, EngineStats: the
                iteration-level core; takes ``now`` from its caller
    virtual     run_virtual(): a single-engine virtual-time runner
    textgen     block_hashes(), WordPool: prompt hashing and deterministic output text
    sampling    parse_sampling(), Sampling: stop, n, seed, logprobs, response_format, tools
    planning    Planner, ChoicePlan: each choice's tokens, reasoning, tool calls, logprobs
    json_instances  instance(): a JSON value validating against a JSON Schema
    logprobs    plausible logprobs in OpenAI's chat and legacy shapes
    behaviour   SimBehaviour: tool-call rate, reasoning model (a backend's sim options)
    service     EngineService, ServiceResponse: the real-time OpenAI-compatible service
    server      build_engine_app(), serve_replicas(): aiohttp front, one replica per port
"""
