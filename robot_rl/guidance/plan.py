"""Subgoal plans for LLM-planned exploration (LLM-TALE-style): schema, validation, planners.

A plan is a list of subgoals; each subgoal is one *skill* with one or more *affordance options*
(alternative ways to do it; the online option selector in ``plan_correction`` picks among them).
An option names a scene body and where/how the gripper meets it:

- ``object``: a body name from the scene (``red_cube``, ``blue_bowl``, ``white_pad``, ``pink_marker``).
- ``point`` (named keypoint of that body; offsets are in the table plane unless noted, see
  :func:`point_offset`):

  * ``center``: the body's centre (grasp centre, bowl/pad centre, marker position);
  * ``top``: the centre of its top face;
  * ``behind`` / ``front``: the side facing away from / towards the plan's *destination* (the
    bowl or pad the plan moves the object to); with no destination, away from / towards the
    robot along the base x axis. ``behind`` is where the fingers go to push an object to its pad.
  * ``left`` / ``right``: the sides 90 degrees counter-clockwise / clockwise (seen from above) from
    the ``front`` direction.

- ``approach``: the axis the gripper moves along for the last few centimetres before contact,
  base frame: ``top`` (fingers down, descending along -z), ``front`` (horizontal, along +x, from
  the robot's side of the object), ``side`` (horizontal, along +-y, from the side the gripper is on).
- ``height_m``: extra height above the point, metres, in [0, 0.3] (e.g. carry 0.12 m above a bowl).

Skill semantics and preconditions (enforced by :func:`validate_plan`, in plan order):

- ``reach(o)``: bring the gripper to the option's point on ``o`` (any scene body).
- ``grasp(o)``: close the fingers on movable ``o``; the gripper must be at ``o`` (the last
  gripper-positioning subgoal was a reach of ``o``) and empty. Destinations cannot be grasped.
- ``lift(o)``: raise the held object ``o`` by ``height_m``; needs a grasp of ``o`` earlier.
- ``transport(d)``: carry the held object to destination ``d`` (a bowl/pad); needs a grasp.
- ``place(d)``: lower the held object onto/into destination ``d``; needs a transport or lift.
- ``release(d or o)``: open the gripper; needs a grasp not yet released. The option names the
  destination it releases over (or the held object itself).
- ``push(d)`` -- **the push convention**: the options of a push subgoal name the *destination*
  pad (the point the pushed object should end at), not the pushed object. The pushed object is
  the one the gripper was brought to by the preceding ``reach``; it must be movable and not
  held. A push plan is therefore ``[reach(object, point="behind"), push(pad, point="center")]``.

Task-level rules: ``arm_push`` plans contain a push of a movable object onto a destination,
``arm_pick_place`` plans grasp an object, bring it to a destination (transport/place) and release
it afterwards, ``arm_reach`` plans contain a reach. Plans hold at most MAX_SUBGOALS subgoals and
each subgoal at most MAX_OPTIONS options. Validation is structural (names, vocabulary, order),
not geometric: ``grasp(red_cube, approach="side", height_m=0.1)`` is valid and will fail in the
simulator -- exactly the kind of wrong option online correction has to recover from.

Subgoal numbers in validation reasons are 1-based (they are read by people and by the model);
indexes in the Python API (``inject_wrong_option``, the option selector) are 0-based.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from pydantic import BaseModel, Field

from robot_rl.guidance.model_client import Answer, ModelClient, system_message, user_message
from sim.tasks.arm import BOWLS, MARKERS, OBJECTS, PADS, body_name, parse_instruction

SKILLS = ("reach", "grasp", "lift", "transport", "place", "release", "push")
POINTS = ("center", "top", "behind", "front", "left", "right")
APPROACHES = ("top", "side", "front")
MAX_HEIGHT_M = 0.3
MAX_SUBGOALS = 12
MAX_OPTIONS = 6
TASKS = ("arm_reach", "arm_push", "arm_pick_place")
# A name no scene has: used by wrong_plan("unknown_object") (plausible for a model to invent).
UNKNOWN_OBJECT = "purple_sphere"


class Affordance(BaseModel):
    """One way to do a subgoal: which body, which point on it, gripper approach axis, extra height."""

    object: str = Field(description="body name from the scene's object list, e.g. red_cube")
    point: str = Field(default="center", description="one of: " + ", ".join(POINTS))
    approach: str = Field(default="top", description="one of: " + ", ".join(APPROACHES))
    height_m: float = Field(default=0.0, description=f"extra height above the point in metres, 0 to {MAX_HEIGHT_M}")


class Subgoal(BaseModel):
    skill: str = Field(description="one of: " + ", ".join(SKILLS))
    options: list[Affordance] = Field(description="alternative ways to do this subgoal, most likely first")


class Plan(BaseModel):
    subgoals: list[Subgoal]
    rationale: str = ""


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


def point_offset(point: str, toward_xy: tuple[float, float] | None, half_size: float) -> tuple[float, float, float]:
    """Offset (m, base frame) of a named point from a body's centre; ``toward_xy`` is the direction
    from the body to the plan's destination (None: the base +x axis). ``height_m`` is added on top."""
    if point not in POINTS:
        raise ValueError(f"unknown point '{point}' (points: {', '.join(POINTS)})")
    dx, dy = toward_xy if toward_xy is not None else (1.0, 0.0)
    norm = math.hypot(dx, dy)
    dx, dy = (dx / norm, dy / norm) if norm > 1e-9 else (1.0, 0.0)
    planar = {
        "center": (0.0, 0.0),
        "behind": (-dx, -dy),
        "front": (dx, dy),
        "left": (-dy, dx),  # +90 degrees about +z
        "right": (dy, -dx),
    }
    if point == "top":
        return (0.0, 0.0, half_size)
    ux, uy = planar[point]
    return (ux * half_size, uy * half_size, 0.0)


# -- validation -----------------------------------------------------------------------------------


@dataclass
class _State:
    """What may be true after the subgoals so far; sets, because options are alternatives."""

    at: set[str]  # bodies the gripper may be at
    held: set[str]  # objects that may be in the gripper (empty: gripper empty)
    moved: bool = False  # a held object was lifted or transported
    grasped: bool = False
    delivered: bool = False  # a held object was transported/placed at a destination
    released_after_delivery: bool = False
    pushed: bool = False  # a movable object was pushed onto a destination
    reached: bool = False


def validate_plan(plan: Plan, scene: Scene) -> list[str]:
    """Reasons the plan cannot be right for the scene (empty list: valid). See the module docstring."""
    if not plan.subgoals:
        return ["empty plan: it has no subgoals"]
    reasons: list[str] = []
    if len(plan.subgoals) > MAX_SUBGOALS:
        reasons.append(f"plan too long: {len(plan.subgoals)} subgoals (at most {MAX_SUBGOALS})")
    st = _State(at=set(), held=set())
    # Once a subgoal has no usable option, the order checks after it would only repeat that error.
    ordered = True
    for i, sg in enumerate(plan.subgoals):
        where = f"subgoal {i + 1} ({sg.skill})"
        if sg.skill not in SKILLS:
            reasons.append(f"subgoal {i + 1}: unknown skill '{sg.skill}' (skills: {', '.join(SKILLS)})")
            ordered = False
            continue
        if not sg.options:
            reasons.append(f"{where}: no options (give at least one)")
            ordered = False
            continue
        if len(sg.options) > MAX_OPTIONS:
            reasons.append(f"{where}: {len(sg.options)} options (at most {MAX_OPTIONS})")
        usable: list[Affordance] = []
        for j, opt in enumerate(sg.options):
            listed = any("unknown object" in r for r in reasons)  # list the scene's objects once
            bad = _option_reasons(opt, scene, listed)
            reasons += [f"{where} option {j + 1}: {r}" for r in bad]
            if opt.object in scene.objects:
                usable.append(opt)
        ordered = ordered and bool(usable)
        if ordered:
            reasons += _step(sg.skill, usable, scene, st, where)
    if not reasons:
        reasons += _task_reasons(scene, st)
    return reasons


def _option_reasons(opt: Affordance, scene: Scene, listed: bool) -> list[str]:
    out = []
    if opt.object not in scene.objects:
        known = "listed above" if listed else ", ".join(sorted(scene.objects))
        out.append(f"unknown object '{opt.object}' (scene objects: {known})")
    if opt.point not in POINTS:
        out.append(f"unknown point '{opt.point}' (points: {', '.join(POINTS)})")
    if opt.approach not in APPROACHES:
        out.append(f"unknown approach '{opt.approach}' (approaches: {', '.join(APPROACHES)})")
    if not (0.0 <= opt.height_m <= MAX_HEIGHT_M):  # also rejects NaN
        out.append(f"height_m {opt.height_m} outside [0, {MAX_HEIGHT_M}]")
    return out


def _step(skill: str, opts: list[Affordance], scene: Scene, st: _State, where: str) -> list[str]:
    """Check the options' preconditions against the state so far, then advance the state."""
    out: list[str] = []
    names = [o.object for o in opts]
    dests = [n for n in names if scene.role(n) == "destination"]
    held = ", ".join(sorted(st.held))
    if skill == "reach":
        st.at, st.reached = set(names), True
    elif skill == "grasp":
        for n in names:
            if scene.role(n) == "destination":
                out.append(f"{where}: cannot grasp '{n}': it is a destination ({scene.objects[n]['shape']}), "
                           "not a movable object")  # fmt: skip
            elif n not in st.at:
                out.append(f"{where}: wrong order: grasp of '{n}' needs the gripper at '{n}' (reach it first)")
        if st.held:
            out.append(f"{where}: wrong order: grasp while already holding {held} (release it first)")
        st.held = {n for n in names if scene.role(n) == "movable"}
        st.grasped, st.moved = st.grasped or bool(st.held), False
    elif skill == "lift":
        if not st.held:
            out.append(f"{where}: wrong order: lift needs a grasp earlier in the plan")
        else:
            out += [f"{where}: lift of '{n}' but the plan holds {held}" for n in names if n not in st.held]
        st.moved = st.moved or bool(st.held)
    elif skill in ("transport", "place"):
        out += [f"{where}: {skill} options must name a destination (a {_dest_kind(scene)}), "
                f"not the movable '{n}'" for n in names if scene.role(n) != "destination"]  # fmt: skip
        if not st.held:
            out.append(f"{where}: wrong order: {skill} needs a grasp earlier in the plan")
        elif skill == "place" and not st.moved:
            out.append(f"{where}: wrong order: place needs a lift or transport of the held object first")
        if st.held and dests:
            st.moved, st.delivered = True, True
        st.at = set(dests) or st.at
    elif skill == "release":
        if not st.held:
            out.append(f"{where}: wrong order: release needs a grasp earlier that is not yet released")
        out += [f"{where}: release over '{n}', which is neither a destination nor the held object"
                for n in names if scene.role(n) != "destination" and n not in st.held]  # fmt: skip
        st.released_after_delivery = st.released_after_delivery or (bool(st.held) and st.delivered)
        st.held, st.moved = set(), False
    elif skill == "push":
        out += [f"{where}: push options name the destination the object is pushed onto (a {_dest_kind(scene)}); "
                f"'{n}' is movable -- reach the object first (point 'behind'), then push(destination)"
                for n in names if scene.role(n) != "destination"]  # fmt: skip
        pushed = {n for n in st.at if scene.role(n) == "movable"}
        if not pushed:
            out.append(f"{where}: wrong order: push needs a reach of the object to push (point 'behind') first")
        for n in sorted(pushed & st.held):
            out.append(f"{where}: cannot push '{n}' while holding it (release it first)")
        st.pushed = st.pushed or bool(dests and pushed - st.held)
        st.at = set(dests) or st.at
    return out


def _dest_kind(scene: Scene) -> str:
    kinds = sorted({a["shape"] for a in scene.objects.values() if a["role"] == "destination"})
    return "/".join(kinds) or "destination"


def _task_reasons(scene: Scene, st: _State) -> list[str]:
    if scene.task == "arm_push" and not st.pushed:
        return ["an arm_push plan must push a movable object onto a pad: [reach(object, point='behind'), push(pad)]"]
    if scene.task == "arm_pick_place":
        missing = [what for what, ok in (("a grasp", st.grasped), ("a transport/place to a bowl", st.delivered),
                                         ("a release after it", st.released_after_delivery)) if not ok]  # fmt: skip
        if missing:
            return ["an arm_pick_place plan must grasp an object, bring it to a bowl and release it; "
                    f"missing: {', '.join(missing)}"]  # fmt: skip
    if scene.task == "arm_reach" and not st.reached:
        return ["an arm_reach plan must reach the marker"]
    return []


# -- oracle and wrong plans -------------------------------------------------------------------------


def oracle_plan(scene: Scene) -> Plan:
    """The plan from the task's structured goal (see the module docstring for the conventions).

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


def inject_wrong_option(plan: Plan, subgoal: int, wrong: Affordance, position: int = 0) -> Plan:
    """A copy of ``plan`` with ``wrong`` inserted at ``position`` among subgoal ``subgoal``'s options
    (0-based). Not validated: the caller decides whether the wrong option must pass validation."""
    if not 0 <= subgoal < len(plan.subgoals):
        raise ValueError(f"subgoal {subgoal} out of range (plan has {len(plan.subgoals)})")
    out = plan.model_copy(deep=True)
    options = out.subgoals[subgoal].options
    if not 0 <= position <= len(options):
        raise ValueError(f"position {position} out of range (subgoal {subgoal} has {len(options)} options)")
    options.insert(position, wrong.model_copy())
    return out


def wrong_option_for(scene: Scene, plan: Plan, subgoal: int, index: int = 0) -> Affordance:
    """A plausible but physically wrong option for a subgoal that still passes validation:
    grasp/lift/reach the right body from a side and too high, carry/place/push/release to another
    destination. ``index`` picks the index-th of these, so several injected options are all distinct
    (the other destination's centre, then its front, left, ... point; for a grasp: approach from the
    side at the top, then at the front, left, ... points). Used by the injected-error experiments."""
    if index < 0:
        raise ValueError(f"index must be >= 0, got {index}")
    sg = plan.subgoals[subgoal]
    right = sg.options[0]
    others = [n for n, a in sorted(scene.objects.items()) if a["role"] == "destination" and n != right.object]
    if sg.skill in ("transport", "place", "push", "release") and others:
        points = [p for p in POINTS if p != "top"]
        obj, point = others[index % len(others)], points[index // len(others) % len(points)]
        return right.model_copy(update={"object": obj, "point": point})
    # grasping 10 cm above the object from the side closes the fingers on air
    point = [p for p in POINTS if p != "center"][index % (len(POINTS) - 1)]
    return right.model_copy(update={"point": point, "approach": "side", "height_m": 0.1})


def inject_wrong_options(scene: Scene, plan: Plan, subgoal: int, n: int) -> Plan:
    """``plan`` with ``n`` distinct wrong options (``wrong_option_for`` 0..n-1) ahead of the subgoal's right one.
    Every wrong option is derived from the original plan: derived from an already injected one, "another
    destination" would be the right one again."""
    wrongs = [wrong_option_for(scene, plan, subgoal, i) for i in range(n)]
    for wrong in reversed(wrongs):
        plan = inject_wrong_option(plan, subgoal, wrong, position=0)
    return plan


WRONG_KINDS = ("unknown_object", "wrong_order", "empty", "wrong_object", "wrong_destination")


def wrong_plan(scene: Scene, kind: str) -> Plan:
    """A deliberately wrong plan. ``unknown_object``/``wrong_order``/``empty`` fail validation;
    ``wrong_object`` (the right skills on another movable object; for reach, a cube instead of the
    marker) and ``wrong_destination`` (the other bowl/pad) validate but do the wrong thing."""
    good = oracle_plan(scene)
    obj = scene.target_object
    if kind == "empty":
        return Plan(subgoals=[], rationale="empty")
    if kind == "unknown_object":
        return _rename(good, obj, UNKNOWN_OBJECT)
    if kind == "wrong_object":
        other = next(n for n, a in sorted(scene.objects.items()) if a["role"] == "movable" and n != obj)
        return _rename(good, obj, other)
    if kind == "wrong_destination":
        if scene.destination is None:
            raise ValueError(f"wrong_destination needs a task with a destination, not {scene.task}")
        other = next(n for n, a in sorted(scene.objects.items())
                     if a["role"] == "destination" and n != scene.destination)  # fmt: skip
        return _rename(good, scene.destination, other)
    if kind == "wrong_order":
        sgs = list(good.subgoals)
        if scene.task == "arm_pick_place":
            sgs[1], sgs[2] = sgs[2], sgs[1]  # lift before grasp
        elif scene.task == "arm_push":
            sgs.reverse()  # push before reaching the object
        else:
            sgs.insert(0, Subgoal(skill="release", options=[Affordance(object=obj)]))  # release before any grasp
        return Plan(subgoals=sgs, rationale="wrong order")
    raise ValueError(f"unknown wrong-plan kind '{kind}' (kinds: {', '.join(WRONG_KINDS)})")


def _rename(plan: Plan, old: str | None, new: str) -> Plan:
    out = plan.model_copy(deep=True)
    for sg in out.subgoals:
        for opt in sg.options:
            if opt.object == old:
                opt.object = new
    return out


# -- planners ---------------------------------------------------------------------------------------


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
        lines += ["", "An earlier plan for this scene failed when the robot tried it:", feedback,
                  "Make a different plan that avoids these failures."]  # fmt: skip
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


__all__ = [
    "APPROACHES",
    "POINTS",
    "SKILLS",
    "Affordance",
    "LLMPlanner",
    "OraclePlanner",
    "Plan",
    "Planner",
    "Scene",
    "Subgoal",
    "inject_wrong_option",
    "make_planner",
    "oracle_plan",
    "plan_prompt",
    "point_offset",
    "scene_from_identity",
    "validate_plan",
    "wrong_option_for",
    "wrong_plan",
]
