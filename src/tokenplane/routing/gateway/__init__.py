"""tokenplane.routing.gateway: the gateway shell around the routing policy code --
the live view of the replicas, the metrics scraper, their Prometheus collector,
the request-path router and the prompt block hashes of request bodies."""
