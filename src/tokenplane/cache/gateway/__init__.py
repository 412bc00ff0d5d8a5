"""The cache's shells: the stores behind the ``CacheStore`` interface and the
service the pipeline's cache stage calls."""
