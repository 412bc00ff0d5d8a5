"""Backends discovered instead of listed: what Kubernetes EndpointSlices and DNS
records say about a backend's replicas (pure), and the watchers that ask them
(``discovery.gateway``)."""
