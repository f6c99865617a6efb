"""robot_rl_ros: ROS 2 nodes that run robot_rl policy bundles on robots behind a safety layer.

Pure logic (limits, input monitoring, the fallback state machine, latency statistics,
the Crazyflie commander emulation) lives in modules that do not import rclpy, so it is tested without ROS.
"""

__version__ = "0.1.0"
