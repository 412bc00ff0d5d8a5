"""tokenplane.auth: API keys (stored hashed) and the principal they resolve to."""
