"""Planners: who writes a scene's plan. The oracle reads the task's structured goal; the LLM planner asks a
language model through ModelClient (its prompt is here) and validates the answer."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from pydantic import BaseModel

from robot_rl.guidance.model_client import Answer, ModelClient, system_message, user_message
from robot_rl.guidance.plan.scene import Scene
from robot_rl.guidance.plan.schema import Affordance, Plan, Subgoal
from robot_rl.guidance.plan.validation import validate_plan


def oracle_plan(scene: Scene) -> Plan:
    """The plan from the task's structured goal (conventions: schema and validation).

    pick_place: reach(obj, top) -> grasp(obj) -> lift(obj, 0.12) -> transport(bowl, 0.12)
    -> place(bowl, 0.03) -> release(bowl); push: reach(obj, behind) -> push(pad);
    reach: reach(marker).
    """
    obj, dest = scene.target_object, scene.destination
    if obj is None:
        raise ValueError(f"scene for '{scene.instruction}' has no structured goal: the oracle cannot plan")
    A, S = Affordance, Subgoal
    if scene.task == "arm_reach":
        subgoals = [S(skill="reach", options=[A(object=obj)])]
    elif scene.task == "arm_push":
        subgoals = [
            # "behind" is relative to the destination: the fingers end up on the far side of the pad
            S(skill="reach", options=[A(object=obj, point="behind", approach="top")]),
            S(skill="push", options=[A(object=dest, point="center", approach="top")]),
        ]
    else:
        subgoals = [
            S(skill="reach", options=[A(object=obj, point="top", approach="top", height_m=0.0)]),
            S(skill="grasp", options=[A(object=obj, point="center", approach="top")]),
            S(skill="lift", options=[A(object=obj, point="center", approach="top", height_m=0.12)]),
            S(skill="transport", options=[A(object=dest, point="center", approach="top", height_m=0.12)]),
            S(skill="place", options=[A(object=dest, point="center", approach="top", height_m=0.03)]),
            S(skill="release", options=[A(object=dest, point="center", approach="top", height_m=0.03)]),
        ]
    return Plan(subgoals=subgoals, rationale=f"oracle plan from the structured goal of '{scene.instruction}'")


class Planner(Protocol):
    def plan(self, scene: Scene, layout_seed: int, feedback: str | None = None) -> tuple[Plan, Answer]: ...


_SYSTEM = """You plan robot arm manipulation as a short list of subgoals. Reply with one JSON object only.

Skills (in plan order, each needs the ones before it):
- reach: move the gripper to a point on a body.
- grasp: close the gripper on a movable object; the gripper must have reached that object just before.
- lift: raise the grasped object by height_m.
- transport: carry the grasped object to a destination (bowl or pad).
- place: lower the carried object onto/into a destination (after lift or transport).
- release: open the gripper over the destination.
- push: push the object the gripper just reached onto a destination. The push options name the
  DESTINATION (e.g. the pad), not the pushed object; reach the object's "behind" point first.
Bowls, pads and markers are destinations: they cannot be grasped or pushed.

Each subgoal lists options: alternative ways to do it, most likely first (1 to 3 options).
An option has:
- "object": a body name copied exactly from the scene's object list;
- "point": one of center, top, behind, front, left, right. behind/front: the object's side facing
  away from / towards the destination; left/right: 90 degrees to that; top: its top face;
- "approach": one of top (gripper comes down from above), front (horizontally from the robot's side),
  side (horizontally from the left or right);
- "height_m": extra height above the point in metres, 0 to 0.3.

JSON shape:
{"rationale": "<one sentence>", "subgoals": [
  {"skill": "<skill>", "options": [{"object": "<body name>", "point": "center", "approach": "top", "height_m": 0.0}]}
]}

Example, for an imaginary scene (black_ball movable, grey_tray destination), "put the black ball in the grey tray":
{"rationale": "pick the ball from above and drop it in the tray", "subgoals": [
  {"skill": "reach", "options": [{"object": "black_ball", "point": "top", "approach": "top", "height_m": 0.0}]},
  {"skill": "grasp", "options": [{"object": "black_ball", "point": "center", "approach": "top", "height_m": 0.0},
                                 {"object": "black_ball", "point": "center", "approach": "side", "height_m": 0.0}]},
  {"skill": "lift", "options": [{"object": "black_ball", "point": "center", "approach": "top", "height_m": 0.1}]},
  {"skill": "transport", "options": [{"object": "grey_tray", "point": "center", "approach": "top", "height_m": 0.1}]},
  {"skill": "place", "options": [{"object": "grey_tray", "point": "center", "approach": "top", "height_m": 0.03}]},
  {"skill": "release", "options": [{"object": "grey_tray", "point": "center", "approach": "top", "height_m": 0.03}]}]}
and for "slide the black ball onto the grey mat" (grey_mat destination):
{"rationale": "get behind the ball and push it onto the mat", "subgoals": [
  {"skill": "reach", "options": [{"object": "black_ball", "point": "behind", "approach": "top", "height_m": 0.0}]},
  {"skill": "push", "options": [{"object": "grey_mat", "point": "center", "approach": "top", "height_m": 0.0}]}]}
"""


def plan_prompt(scene: Scene, feedback: str | None = None) -> list[dict]:
    """Chat messages for one planning request. The structured goal (target_object, destination) is
    deliberately absent: the model reads the instruction and the object list like anyone else."""
    lines = [
        f"Instruction: {scene.instruction}",
        "",
        "Objects in the scene (body name: colour shape, role):",
        *(f"- {n}: {a['colour']} {a['shape']}, {a['role']}" for n, a in sorted(scene.objects.items())),
    ]
    if feedback:
        lines += [
            "",
            "An earlier plan for this scene failed when the robot tried it:",
            feedback,
            "Make a different plan that avoids these failures.",
        ]
    lines += ["", "Reply with the JSON plan."]
    return [system_message(_SYSTEM), user_message("\n".join(lines))]


class LLMPlanner:
    """Plans from a language model through ModelClient (cached per key; validated with validate_plan).

    Invalid answers are sent back with the validation reasons (the client's retries); when every
    attempt fails, the client's ``on_failure`` decides: the oracle plan, or ModelError.
    """

    def __init__(self, client: ModelClient, prompt_version: str = "plan-v1"):
        self.client = client
        self.prompt_version = prompt_version

    def key(self, scene: Scene, layout_seed: int, feedback: str | None = None) -> dict:
        return {
            "kind": "plan",
            "prompt_version": self.prompt_version,
            "layout_seed": int(layout_seed),
            "instruction": scene.instruction,
            "objects": sorted(scene.objects),
            "feedback": feedback or "",
        }

    def plan(self, scene: Scene, layout_seed: int, feedback: str | None = None) -> tuple[Plan, Answer]:
        answer = self.client.ask(
            key=self.key(scene, layout_seed, feedback),
            messages=plan_prompt(scene, feedback),
            schema=Plan,
            check=_checker(scene),
            oracle=lambda: oracle_plan(scene),
        )
        value = answer.value
        return (value if isinstance(value, Plan) else Plan.model_validate(value.model_dump())), answer


def _checker(scene: Scene) -> Callable[[BaseModel], None]:
    def check(plan: BaseModel) -> None:
        # the client validated against the Plan schema already; re-wrap only if handed a look-alike
        reasons = validate_plan(plan if isinstance(plan, Plan) else Plan.model_validate(plan.model_dump()), scene)
        if reasons:
            raise ValueError("; ".join(reasons))

    return check


class OraclePlanner:
    """The structured-goal plan, with an Answer(source="oracle", attempts=0, key_hash="") for uniformity.
    ``feedback`` is ignored: the oracle has nothing to learn from it."""

    def plan(self, scene: Scene, layout_seed: int, feedback: str | None = None) -> tuple[Plan, Answer]:
        p = oracle_plan(scene)
        return p, Answer(value=p, source="oracle", attempts=0, errors=[], key_hash="", raw_text=None)


def make_planner(kind: str, client: ModelClient | None = None) -> Planner:
    """``"llm"`` (needs a ModelClient) or ``"oracle"``."""
    if kind == "oracle":
        return OraclePlanner()
    if kind == "llm":
        if client is None:
            raise ValueError("planner 'llm' needs a ModelClient (guidance model settings)")
        return LLMPlanner(client)
    raise ValueError(f"unknown planner '{kind}' (planners: llm, oracle)")
