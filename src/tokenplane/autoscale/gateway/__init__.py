"""The autoscaler's gateway shell: the periodic controller that builds each pool's
snapshot, runs the policy, records the decisions and hands them to an actuator."""
