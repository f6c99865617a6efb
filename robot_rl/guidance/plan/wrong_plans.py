"""Deliberately wrong plans and options, for the injected-error experiments: online correction and
re-planning have to recover from them."""

from __future__ import annotations

from robot_rl.guidance.plan.planners import oracle_plan
from robot_rl.guidance.plan.scene import Scene
from robot_rl.guidance.plan.schema import POINTS, Affordance, Plan, Subgoal

# A name no scene has: used by wrong_plan("unknown_object") (plausible for a model to invent).
UNKNOWN_OBJECT = "purple_sphere"


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
        other = next(
            n for n, a in sorted(scene.objects.items()) if a["role"] == "destination" and n != scene.destination
        )
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
