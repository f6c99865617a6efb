"""One home per convention: units, frames, quaternion order and the observation op names.

sim (torch), robot_rl.deploy (numpy) and the ROS nodes import these from here instead of keeping copies.
numpy and the standard library only (no torch, no mujoco), and nothing of ours: every other package may
import it, it imports none of them (import-linter checks both directions).
"""

from __future__ import annotations

from robot_conventions import frames, observation_ops, units

__all__ = ["frames", "observation_ops", "units"]
