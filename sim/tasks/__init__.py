"""Tasks, one file per family. TASKS maps a task name to its constructor."""

from sim.tasks.arm import ArmPickPlace, ArmPush, ArmReach
from sim.tasks.crazyflie import CrazyflieGoto, CrazyflieHover, CrazyflieSwarm
from sim.tasks.quadruped import QuadrupedVelocity

TASKS = {
    "crazyflie_hover": CrazyflieHover,
    "crazyflie_goto": CrazyflieGoto,
    "crazyflie_swarm": CrazyflieSwarm,
    "arm_reach": ArmReach,
    "arm_push": ArmPush,
    "arm_pick_place": ArmPickPlace,
    "quadruped_velocity": QuadrupedVelocity,
}


def make_task(name: str, **kwargs):
    if name not in TASKS:
        raise ValueError(f"unknown task '{name}' (available: {', '.join(sorted(TASKS))})")
    return TASKS[name](**kwargs)


__all__ = ["TASKS", "make_task", "CrazyflieHover", "CrazyflieGoto"]
