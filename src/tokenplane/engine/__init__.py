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
    service     EngineService, ServiceResponse: the real-time OpenAI-compatible service
    server      build_engine_app(), serve_replicas(): aiohttp front, one replica per port
"""
