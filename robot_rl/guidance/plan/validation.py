"""Whether a plan can be right for a scene: names, vocabulary and skill order (see ``schema`` for the fields).

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
it afterwards, ``arm_reach`` plans contain a reach. Validation is structural (names, vocabulary, order),
not geometric: ``grasp(red_cube, approach="side", height_m=0.1)`` is valid and will fail in the
simulator -- exactly the kind of wrong option online correction has to recover from.

Subgoal numbers in validation reasons are 1-based (they are read by people and by the model);
indexes in the Python API (``inject_wrong_option``, the option selector) are 0-based.
"""

from __future__ import annotations

from dataclasses import dataclass

from robot_rl.guidance.plan.scene import Scene
from robot_rl.guidance.plan.schema import (
    APPROACHES,
    MAX_HEIGHT_M,
    MAX_OPTIONS,
    MAX_SUBGOALS,
    POINTS,
    SKILLS,
    Affordance,
    Plan,
)


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
                out.append(
                    f"{where}: cannot grasp '{n}': it is a destination ({scene.objects[n]['shape']}), "
                    "not a movable object"
                )
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
        out += [
            f"{where}: {skill} options must name a destination (a {_dest_kind(scene)}), not the movable '{n}'"
            for n in names
            if scene.role(n) != "destination"
        ]
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
        out += [
            f"{where}: release over '{n}', which is neither a destination nor the held object"
            for n in names
            if scene.role(n) != "destination" and n not in st.held
        ]
        st.released_after_delivery = st.released_after_delivery or (bool(st.held) and st.delivered)
        st.held, st.moved = set(), False
    elif skill == "push":
        out += [
            f"{where}: push options name the destination the object is pushed onto (a {_dest_kind(scene)}); "
            f"'{n}' is movable -- reach the object first (point 'behind'), then push(destination)"
            for n in names
            if scene.role(n) != "destination"
        ]
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
        missing = [
            what
            for what, ok in (
                ("a grasp", st.grasped),
                ("a transport/place to a bowl", st.delivered),
                ("a release after it", st.released_after_delivery),
            )
            if not ok
        ]
        if missing:
            return [
                "an arm_pick_place plan must grasp an object, bring it to a bowl and release it; "
                f"missing: {', '.join(missing)}"
            ]
    if scene.task == "arm_reach" and not st.reached:
        return ["an arm_reach plan must reach the marker"]
    return []
