"""Sentence embeddings that load offline from an installed package (no hub download):
the semantic cache's vectors, and the RAG packer's when it ranks by meaning."""
