"""tokenplane.tokens: tokenizers, prompt counting by source, estimates and predictions.

Public API (import from the submodules; importing this package loads nothing):

- ``registry.TokenizerRegistry(models=None)``: ``.get(spec) -> Tokenizer`` (specs
  ``tiktoken:cl100k_base``, ``qwen:<model>``, ``deepseek``, ``hf:/path/tokenizer.json``),
  ``.resolve(model) -> ModelTokenizing(spec, family, exact) | None``,
  ``.for_model(model) -> Tokenizer | None``. Lazy loading, cached per instance.
- ``templates.make_template(family, tokenizer, image_tokens=765) -> ChatTemplate`` for
  families ``openai``, ``chatml``, ``qwen``, ``deepseek``, ``llama3``;
  ``ChatTemplate.encode(messages, tools=None) -> list[int]`` (the full prompt ids, ground
  truth) and ``.render(messages, tools=None) -> str``.
- ``segments.SegmentCache(max_entries=8192, max_chars=16_000_000)``: bounded LRU of segment
  counts by content (``hits``, ``misses``, ``evictions``, ``hit_ratio``); ``.lookup(tok,
  texts)`` counts several one-part segments, the misses in one tokenizer call.
- ``counter.ChatCounter(template, cache, exact=True)``:
  ``.count(messages, tools=None) -> CountResult`` (``counts: TokenCounts`` by source,
  ``segments: list[SegmentInfo]``, ``system_fingerprint``, ``exact``, ``flags``) whose
  ``counts.prompt == len(template.encode(...))``; ``.count_prompt(prompt)`` for plain
  completions; ``.count_text(text)``. Plain chat requests take a fast path
  (``plain.plain_shape(template)``), identical in counts to ``.count_pieces(...)``.
- ``registry.TiktokenTokenizer.count`` counts short ASCII text in Python without releasing
  the GIL (``ascii_bpe.AsciiBpe``, exact); ``.count_many(texts)`` makes one tiktoken call.
- ``counter.TokenCounting(registry=None, cache=None)``: ``.for_model(model) ->
  ChatCounter | None`` (None: unknown tokenizer, use the estimator).
- ``messages.normalize(messages) -> Conversation``: the source convention (system /
  history / context / tools / user; ``"tokenplane_source": "context"``) is documented there.
- ``estimator.Estimator()``: ``.estimate(model, text) -> int``,
  ``.observe(model, text_features(text), reported_prompt_tokens)``,
  ``.error_stats(model) -> ErrorStats``, ``.chars_per_token(model)``.
- ``predictor.LengthPredictor(default=256, min_samples=20, window=256)``:
  ``.predict(LengthKey(tenant, app, model), prompt_tokens, max_tokens=None, q=0.5) -> int``,
  ``.p50_p90(...)``, ``.quantile(...) -> Prediction(tokens, level, samples)``,
  ``.observe(key, prompt_tokens, output_tokens)``, ``.error() -> float``.
- ``base.Tokenizer`` (protocol) and ``counts.TokenCounts`` (tokens by source).
"""
