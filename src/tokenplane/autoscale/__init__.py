"""Token-based autoscaling: pure policies (snapshot + now -> decision) that the
gateway's actuators and the simulator run unchanged."""
