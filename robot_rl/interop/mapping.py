"""Names onto our conventions: a foreign input or output -> the raw input our runtime reads, and joint orders.

Every function here either maps exactly or says why not; the importers collect those reasons and refuse the whole
policy in one line naming each unmapped input, joint and size, instead of guessing.
"""

from __future__ import annotations

from dataclasses import dataclass

from robot_rl.deploy.observation import ObsTerm
from robot_rl.interop.conventions import (
    NAME_TO_RAW,
    PROJECTED_GRAVITY,
    QUAT_XYZW,
    RAW_FRAMES,
    RAW_TO_KIND,
    TargetRobot,
    joint_key,
)


@dataclass(frozen=True)
class Mapped:
    """A foreign input as one observation term of ours, and the order its elements take in the foreign network."""

    term: ObsTerm
    gather: tuple[int, ...] | None  # gather[i]: which of our term's elements the network's i-th input is


def joint_order(names: list[str], robot: TargetRobot, what: str) -> tuple[tuple[int, ...] | None, list[str]]:
    """idx with idx[i] = our index of the foreign joint names[i] (None: already our order), or the problems."""
    ours = {j: i for i, j in enumerate(robot.joint_names)}
    keys = [joint_key(n) for n in names]
    unknown = [n for n, k in zip(names, keys, strict=True) if k not in ours]
    missing = [j for j in robot.joint_names if j not in keys]
    problems = [f"{what}: unknown joint '{n}'" for n in unknown] + [f"{what}: no joint '{j}'" for j in missing]
    if problems or len(keys) != len(set(keys)):
        return None, problems or [f"{what}: a joint named twice"]
    idx = tuple(ours[k] for k in keys)
    return (None if idx == tuple(range(len(idx))) else idx), []


def _strip(name: str) -> str:
    return name[4:] if name.startswith("ego_") else name  # Isaac Lab prefixes the entity ("ego_joint_pos")


def raw_name(name: str, kind: str | None, robot: TargetRobot) -> str | None:
    """Which raw input of the robot's a foreign input is, by its semantic kind, else by its name."""
    if kind in RAW_TO_KIND.values():
        return robot.raw_of_kind(kind)
    raw = NAME_TO_RAW.get(_strip(name))
    return raw if raw in robot.raw_inputs else None


def stated_frame(name: str, extra: dict) -> str | None:
    """The frame an input says it is in: its `frame` field (our export), else Isaac Lab's suffix (_w, _b)."""
    if extra.get("frame"):
        return str(extra["frame"])
    return {"_w": "world", "_b": "body"}.get(name[-2:])


def _frame_problem(label: str, name: str, raw: str, extra: dict, robot: TargetRobot) -> list[str]:
    said, ours = stated_frame(name, extra), RAW_FRAMES.get(raw)
    if said is not None and ours is not None and said != ours:
        return [f"{label}: {said} frame, {robot.robot}'s {raw} is in the {ours} frame"]
    if said is None and raw in robot.frame_required:
        return [f"{label}: its frame is not stated ('frame' or an _w/_b name), {robot.robot}'s {raw} is {ours}"]
    return []


def map_input(
    name: str,
    kind: str | None,
    dim: int,
    element_names: tuple[str, ...] | None,
    robot: TargetRobot,
    extra: dict | None = None,
) -> tuple[Mapped | None, list[str]]:
    """One foreign observation input as our term (identity of a raw input, or projected gravity from the attitude)."""
    label = f"input '{name}'" + (f" ({kind})" if kind else "")
    if _strip(name) in PROJECTED_GRAVITY:
        if "quaternion" not in robot.raw_inputs:
            return None, [f"{label}: {robot.robot} measures no attitude to compute it from"]
        if dim != 3:
            return None, [f"{label}: {dim} values, projected gravity has 3"]
        return Mapped(ObsTerm(name, "body_frame", ("gravity_direction", "quaternion"), 3, 1.0, float("inf")), None), []
    raw = raw_name(name, kind, robot)
    if raw is None:
        return None, [f"{label}: no raw input of {robot.robot} means this"]
    problems = _frame_problem(label, name, raw, extra or {}, robot)
    if problems:
        return None, problems
    gather = None
    if raw in ("joint_position", "joint_velocity"):
        n = len(robot.joint_names)
        if element_names is None:
            if dim != n:
                return None, [f"{label}: {dim} values and no joint names, {robot.robot} has {n} joints"]
            return None, [f"{label}: no joint names, so the joint order is unknown"]
        gather, problems = joint_order(list(element_names), robot, label)
        if problems:
            return None, problems
        gather = None if gather is None else tuple(gather)
    elif raw == "quaternion":
        if element_names is None or sorted(e.lower() for e in element_names) != sorted(QUAT_XYZW):
            return None, [f"{label}: the component order is not named (x, y, z, w in some order)"]
        gather = tuple(QUAT_XYZW.index(e.lower()) for e in element_names)
        gather = None if gather == (0, 1, 2, 3) else gather
    elif dim != robot.raw_dims[raw]:
        return None, [f"{label}: {dim} values, our {raw} has {robot.raw_dims[raw]}"]
    return Mapped(ObsTerm(name, "identity", (raw,), dim, 1.0, float("inf")), gather), []


def refuse(source: str, problems: list[str]) -> None:
    """Raise the one line that names everything that could not be mapped."""
    from robot_rl.interop.errors import InteropError

    if problems:
        raise InteropError(f"{source}: cannot map {len(problems)} item(s): " + "; ".join(problems))
