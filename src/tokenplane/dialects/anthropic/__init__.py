"""Anthropic's Messages API: its requests and answers to and from the canonical
(chat-shaped) ones, its stream events, its errors (docs/MESSAGES.md)."""
