"""Discovery's shells: the Kubernetes EndpointSlice watch, the DNS poll, and the
sync that adds and drains replicas in the gateway's pools."""
