"""The reverse direction, for ``type: anthropic`` backends: a canonical chat body as a
Messages request, and the backend's Messages answer or stream events as canonical
``chat.completion`` / ``chat.completion.chunk`` objects."""

from __future__ import annotations

from tokenplane.dialects.anthropic.backend_answer import finish_reason, to_chat_answer
from tokenplane.dialects.anthropic.backend_request import to_messages_request
from tokenplane.dialects.anthropic.backend_stream import ChatChunks

__all__ = ["ChatChunks", "finish_reason", "to_chat_answer", "to_messages_request"]
