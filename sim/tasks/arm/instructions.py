"""The instruction grammar: templates over object attributes ("put the red cube in the blue bowl") and the
parser that turns an instruction back into the body names it refers to (for reward, segmentation and
guidance code)."""

from __future__ import annotations

import re

from sim.tasks.arm.scene import BOWLS, MARKERS, OBJECTS, PADS, body_name

TEMPLATES = {
    "arm_reach": ["move the gripper to the {target}", "reach the {target}", "touch the {target}"],
    "arm_push": ["push the {object} onto the {goal}", "slide the {object} to the {goal}"],
    "arm_pick_place": [
        "put the {object} in the {goal}",
        "pick up the {object} and place it in the {goal}",
        "move the {object} into the {goal}",
    ],
}
DESTINATIONS = {"arm_push": PADS, "arm_pick_place": BOWLS}
ROBOT_WORDS = {"gripper", "robot", "arm", "hand"}


def destinations(task: str) -> list[tuple[str, str]]:
    """(colour, shape) of every place the task's instruction may name as its goal (reach: the markers)."""
    return DESTINATIONS.get(task, [(c, "marker") for c in MARKERS])


def wording(task: str, template: int, obj: int, goal: int) -> str:
    """The instruction from template `template` of the task, naming object `obj` and destination `goal`."""
    obj_words, goal_words = " ".join(OBJECTS[obj]), " ".join(destinations(task)[goal])
    return TEMPLATES[task][template].format(object=obj_words, goal=goal_words, target=goal_words)


def parse_instruction(task: str, text: str) -> dict[str, str]:
    """Identities named by an instruction: {'target': ...} for reach, {'object', 'goal'} otherwise.

    Raises ValueError naming what is wrong: an unknown task, a phrase naming nothing in the scene,
    or the wrong number or kind of things for the task.
    """
    if task not in TEMPLATES:
        raise ValueError(f"unknown arm task '{task}' (available: {', '.join(sorted(TEMPLATES))})")
    # noun phrases "the <colour> <shape>"; "the gripper ..." refers to the robot, not the scene
    phrases = [p for p in re.findall(r"\bthe (\w+) (\w+)", text.lower()) if p[0] not in ROBOT_WORDS]
    scene = {f"{c} {s}" for c, s in OBJECTS + BOWLS + PADS} | {f"{c} marker" for c in MARKERS}
    for colour, shape in phrases:
        if f"{colour} {shape}" not in scene:
            raise ValueError(
                f"instruction '{text}' names the '{colour} {shape}', which is not in the scene "
                f"(it has: {', '.join(sorted(scene))})"
            )
    if task == "arm_reach":
        if len(phrases) != 1 or phrases[0][1] != "marker":
            raise ValueError(f"an arm_reach instruction names one marker, e.g. 'reach the pink marker'; got '{text}'")
        return {"target": body_name(*phrases[0])}
    dest = DESTINATIONS[task]
    if len(phrases) != 2 or phrases[0] not in OBJECTS or phrases[1] not in dest:
        kinds = " or ".join(f"the {c} {s}" for c, s in dest)
        raise ValueError(f"a {task} instruction names an object, then {kinds}; got '{text}'")
    return {"object": body_name(*phrases[0]), "goal": body_name(*phrases[1])}
