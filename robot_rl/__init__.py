"""robot_rl: guided reinforcement learning from MuJoCo to ROS 2 robots."""

__version__ = "0.1.0"
