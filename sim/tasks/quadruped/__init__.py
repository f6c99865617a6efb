"""The Go1-like quadruped: one module per job, in the layout of MuJoCo Playground's locomotion/go1.

- constants: the robot (asset paths, joints, limits, contact sensor rows)
- terrain: the rough heightfield, its MJCF scene and the terrain curriculum
- velocity_config: the velocity task's observation layout, noise, domain randomization and reward weights
- velocity: QuadrupedVelocity, the velocity-tracking task
"""

from sim.tasks.quadruped.constants import DEFAULT_JOINT_POS, JOINT_NAMES
from sim.tasks.quadruped.terrain import TERRAIN_TYPES, make_terrain
from sim.tasks.quadruped.velocity import QuadrupedVelocity
from sim.tasks.quadruped.velocity_config import DR_LEVELS, RewardWeights

__all__ = [
    "QuadrupedVelocity",
    "RewardWeights",
    "DR_LEVELS",
    "JOINT_NAMES",
    "DEFAULT_JOINT_POS",
    "TERRAIN_TYPES",
    "make_terrain",
]
