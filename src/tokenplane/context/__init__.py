"""Application token flows, as pure policy: RAG context packing (``packer``) and
history trimming on overflow (``trim``).

Nothing here does I/O: the gateway hands in the documents, the user's turn, a budget and
a function that counts a text's tokens exactly with the model's own tokenizer
(``tokens/``), and gets back what to send and what was dropped, and why
(docs/CONTEXT.md).
"""
