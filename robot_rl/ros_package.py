"""The ROS 2 package's functions, found through the entry points its setup.py registers.

robot_rl never imports robot_rl_ros: the package depends on robot_rl.deploy, so an import the other way
would tie the training stack to ROS. `robot-rl sitl` and `robot-rl deploy check` look the functions up here.
"""

from __future__ import annotations

from collections.abc import Callable
from importlib.metadata import entry_points
from typing import Any

GROUP = "robot_rl.ros"


class RosPackageMissing(ImportError):
    """No installed distribution registers the function: robot_rl_ros is not installed (or is too old).

    An ImportError, so callers that fall back when the ROS 2 stack is absent treat both cases alike."""


def ros_function(name: str, group: str = GROUP) -> Callable[..., Any]:
    """The object entry point `name` of `group` names (importing its module: an ImportError there, such as
    rclpy missing, propagates); RosPackageMissing when no installed distribution registers it."""
    found = entry_points(group=group, name=name)
    for entry in found:
        return entry.load()
    raise RosPackageMissing(
        f"robot_rl_ros is not installed (no entry point {name!r} in group {group!r}; pip install ./ros_nodes)"
    )
