"""Arm tasks on a Panda-like arm at a table: reach a marker, push an object onto a pad, put an object in a bowl.

One file per job: scene.py (the model, its state layout, the things on the table, layouts), instructions.py
(the grammar), controller.py (action modes, IK), observations.py (terms, noise, cameras), randomize.py
(domain randomization), base.py (ArmTask, what the tasks share) and one file per task with its reward
weights: reach.py, push.py, pick_place.py.
"""

from sim.tasks.arm.base import ArmTask
from sim.tasks.arm.controller import ACTION_SPECS
from sim.tasks.arm.instructions import TEMPLATES, parse_instruction
from sim.tasks.arm.pick_place import ArmPickPlace, PickPlaceRewards
from sim.tasks.arm.push import ArmPush, PushRewards
from sim.tasks.arm.randomize import DR_LEVELS
from sim.tasks.arm.reach import ArmReach, ReachRewards
from sim.tasks.arm.scene import ARM_DOF, BOWLS, FINGER_QPOS, MARKERS, MODEL_PATH, OBJ_QPOS0, OBJECTS, PADS, body_name

__all__ = [
    "ACTION_SPECS",
    "ARM_DOF",
    "BOWLS",
    "DR_LEVELS",
    "FINGER_QPOS",
    "MARKERS",
    "MODEL_PATH",
    "OBJ_QPOS0",
    "OBJECTS",
    "PADS",
    "TEMPLATES",
    "ArmPickPlace",
    "ArmPush",
    "ArmReach",
    "ArmTask",
    "PickPlaceRewards",
    "PushRewards",
    "ReachRewards",
    "body_name",
    "parse_instruction",
]
