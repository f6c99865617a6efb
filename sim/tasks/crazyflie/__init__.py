"""The Crazyflie 2.1: one module per job, one file per task, each task's configuration beside it.

- constants: the robot (model path, rest height, size)
- hover, hover_config: CrazyflieHover and its observation layout, action modes, randomization, rewards
- goto: CrazyflieGoto, hover with moving goals
- swarm, swarm_config: CrazyflieSwarm, a team in clutter, and its scene numbering, noise and rewards
- swarm_teacher: the swarm's CBF-filtered planner teachers and the scene geometry they use
"""

from sim.tasks.crazyflie.constants import MODEL_PATH, REST_Z
from sim.tasks.crazyflie.goto import CrazyflieGoto
from sim.tasks.crazyflie.hover import CrazyflieHover
from sim.tasks.crazyflie.hover_config import ACTION_SPECS, INTEGRATORS, OBS_LAYOUT
from sim.tasks.crazyflie.swarm import CrazyflieSwarm
from sim.tasks.crazyflie.swarm_config import SwarmRewardWeights

__all__ = [
    "CrazyflieHover",
    "CrazyflieGoto",
    "CrazyflieSwarm",
    "SwarmRewardWeights",
    "MODEL_PATH",
    "REST_Z",
    "OBS_LAYOUT",
    "INTEGRATORS",
    "ACTION_SPECS",
]
