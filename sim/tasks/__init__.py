"""Tasks, one file per family. TASKS maps a task name to its constructor."""

from sim.tasks.crazyflie import CrazyflieGoto, CrazyflieHover

TASKS = {"crazyflie_hover": CrazyflieHover, "crazyflie_goto": CrazyflieGoto}


def make_task(name: str, **kwargs):
    if name not in TASKS:
        raise ValueError(f"unknown task '{name}' (available: {', '.join(sorted(TASKS))})")
    return TASKS[name](**kwargs)


__all__ = ["TASKS", "make_task", "CrazyflieHover", "CrazyflieGoto"]
