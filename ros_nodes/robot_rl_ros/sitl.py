"""Software in the loop: sim bridge, policy and safety nodes as separate processes over DDS on loopback.

`fly(bundle_dir, seconds, goal)` is what a demo or CI test calls; `SitlGraph` starts the same
processes for tests that inject faults (kill the policy, publish bad state, press e-stop).
"""

from robot_rl_ros.sitl_graph import SitlGraph
from robot_rl_ros.sitl_observers import Observer, SwarmObserver
from robot_rl_ros.sitl_scenarios import (
    fly,
    fly_recorded,
    fly_swarm,
    pick_place,
    pick_place_recorded,
    reach,
    reach_recorded,
    walk,
    walk_recorded,
)

__all__ = [
    "Observer",
    "SitlGraph",
    "SwarmObserver",
    "fly",
    "fly_recorded",
    "fly_swarm",
    "pick_place",
    "pick_place_recorded",
    "reach",
    "reach_recorded",
    "walk",
    "walk_recorded",
]
