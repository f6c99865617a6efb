"""Simulation: physics backends, robot models, tasks, the batched env. Knows nothing of learners or ROS."""
