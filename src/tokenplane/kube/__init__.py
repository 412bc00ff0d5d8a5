"""The Kubernetes API client the gateway uses (discovery and the autoscaling
actuator), authenticated in-cluster or from a kubeconfig file."""
