"""What a planner is told about one layout and what its plans are validated against: the Scene."""

from __future__ import annotations

from dataclasses import dataclass

from sim.tasks.arm import BOWLS, MARKERS, OBJECTS, PADS, body_name, parse_instruction

TASKS = ("arm_reach", "arm_push", "arm_pick_place")


@dataclass
class Scene:
    """What a planner is told and what plans are validated against.

    ``target_object`` / ``destination`` come from the task's structured goal: oracle knowledge,
    never put into a model prompt (the model has to read the instruction).
    """

    task: str  # "arm_push" | "arm_pick_place" | "arm_reach"
    instruction: str
    objects: dict[str, dict]  # body name -> {"colour", "shape", "role": "movable" | "destination"}
    target_object: str | None
    destination: str | None

    def role(self, name: str) -> str | None:
        return self.objects[name]["role"] if name in self.objects else None


def scene_from_identity(task: str, identity: dict) -> Scene:
    """The scene of one world from ``ArmTask.identities()``: {"instruction", "object"/"goal" or "target"}.

    arm_push: the 4 objects (movable) + 2 pads; arm_pick_place: the 4 objects + 2 bowls;
    arm_reach: the 4 objects + the marker shown in that world (the task draws one marker).
    Missing identity keys are parsed from the instruction.
    """
    if task not in TASKS:
        raise ValueError(f"unknown arm task '{task}' (available: {', '.join(TASKS)})")
    instruction = identity["instruction"]
    names = identity if ("object" in identity or "target" in identity) else parse_instruction(task, instruction)
    objects = {body_name(c, s): {"colour": c, "shape": s, "role": "movable"} for c, s in OBJECTS}
    if task == "arm_reach":
        marker = names["target"]
        colour = marker.removesuffix("_marker")
        if colour not in MARKERS:
            raise ValueError(f"unknown marker '{marker}' (markers: {', '.join(f'{c}_marker' for c in MARKERS)})")
        objects[marker] = {"colour": colour, "shape": "marker", "role": "destination"}
        return Scene(task, instruction, objects, target_object=marker, destination=None)
    for c, s in PADS if task == "arm_push" else BOWLS:
        objects[body_name(c, s)] = {"colour": c, "shape": s, "role": "destination"}
    return Scene(task, instruction, objects, target_object=names["object"], destination=names["goal"])
