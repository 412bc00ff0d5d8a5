"""The wire dialects the gateway speaks, pure: how a client's API (OpenAI Chat
Completions, Anthropic Messages, ...) maps to the canonical request and answer the
stages work on, and back (docs/EXTENDING.md, "A new dialect")."""
