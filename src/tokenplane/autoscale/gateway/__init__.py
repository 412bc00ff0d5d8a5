"""The autoscaler's shells: the actuators that carry a decision out and the loop that
feeds the policy."""
