"""An mjlab ONNX export (rsl_rl's actor with mjlab's metadata) -> one of our bundles.

mjlab writes its metadata as comma-separated strings in the ONNX file's metadata_props: joint_names,
default_joint_pos, joint_stiffness and joint_damping, action_scale, observation_names with per-term scales, clips
and history lengths, command_names. The network reads the actor observation vector and writes raw actions a with
target = default + action_scale * a (mjlab's JointPositionAction). The bundle keeps our layout (each term from raw
state, joints in our order; the ONNX gathers them into mjlab's) and divides the actions by one factor k, so that
our runtime's clip to [-1, 1] binds only where the target would leave the joint limits and its last action (scaled
back by k) is mjlab's `actions` term.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx

from robot_rl.deploy.bundle import PolicyBundle
from robot_rl.deploy.observation import ObsTerm
from robot_rl.interop.conventions import TargetRobot
from robot_rl.interop.errors import InteropError
from robot_rl.interop.imported_bundle import joint_action, save_bundle
from robot_rl.interop.mapping import joint_order, refuse
from robot_rl.interop.onnx_wrap import Block, wrap_policy

REQUIRED = ("joint_names", "default_joint_pos", "action_scale", "observation_names", "joint_stiffness", "joint_damping")
COMMAND_DIMS = {"twist": 3}  # mjlab's velocity command: lin_vel_x, lin_vel_y, ang_vel_z (our vx, vy, yaw rate)


def read_metadata(model: onnx.ModelProto, path: Path) -> dict[str, list[str]]:
    meta = {p.key: p.value.split(",") for p in model.metadata_props}
    missing = [k for k in REQUIRED if k not in meta]
    if missing:
        raise InteropError(f"{path}: not an mjlab export (its ONNX metadata lacks {', '.join(missing)})")
    return meta


def _floats(meta: dict, key: str) -> np.ndarray:
    return np.array([float(x) for x in meta[key]])


def _term(name: str, scale: str, clip: str, n: int, order, problems: list[str]) -> tuple[ObsTerm, int, tuple | None]:
    """One mjlab actor term as our term, its size, and the joint gather for joint-ordered terms."""
    try:
        s = float(scale)
    except ValueError:
        problems.append(f"term '{name}': a per-element scale ({scale}) is not supported")
        s = 1.0
    lo, hi = (float(x) for x in clip.split(";"))
    if lo != -hi:
        problems.append(f"term '{name}': asymmetric clip [{lo:g}, {hi:g}]")
    c = hi if hi > 0 else float("inf")
    joints = tuple(order) if order is not None else None
    table = {
        "base_lin_vel": (("identity", ("base_linear_velocity",)), 3, None),
        "base_ang_vel": (("identity", ("angular_velocity",)), 3, None),
        "projected_gravity": (("body_frame", ("gravity_direction", "quaternion")), 3, None),
        "joint_pos": (("difference", ("joint_position", "default_joint_position")), n, joints),
        "joint_vel": (("identity", ("joint_velocity",)), n, joints),
        "actions": (("identity", ("last_action",)), n, joints),
    }
    if name not in table:
        problems.append(f"observation term '{name}': no raw input of ours means this")
        return None, 0, None
    (op, inputs), dim, gather = table[name]
    return ObsTerm(name, op, inputs, dim, s, c), dim, gather


def import_mjlab(path: str | Path, robot: TargetRobot, out_dir: Path, control_rate_hz: float | None) -> PolicyBundle:
    """Map and write the bundle; raises InteropError naming every term, joint or size that cannot be mapped."""
    path = Path(path)
    try:
        model = onnx.load(str(path))
    except Exception as e:  # onnx raises DecodeError and friends for a file that is not a model
        raise InteropError(f"{path} is not an ONNX model ({type(e).__name__})") from None
    meta = read_metadata(model, path)
    problems: list[str] = []
    n = len(robot.joint_names)
    order, bad = joint_order(meta["joint_names"], robot, "joint_names")
    problems += bad
    net_in, net_out = model.graph.input[0], model.graph.output[0]
    obs_dim = net_in.type.tensor_type.shape.dim[-1].dim_value
    act_dim = net_out.type.tensor_type.shape.dim[-1].dim_value
    if act_dim != n or len(meta["joint_names"]) != n:
        problems.append(f"action size {act_dim} ({len(meta['joint_names'])} joint names), {robot.robot} has {n} joints")
    history = [float(x) for x in meta.get("observation_terms_history_length", [])]
    problems += [
        f"term '{t}': a history of {h:g} steps" for t, h in zip(meta["observation_names"], history, strict=False) if h
    ]
    scales = meta.get("observation_terms_scale", ["1"] * len(meta["observation_names"]))
    clips = meta.get("observation_terms_clip", ["-inf;inf"] * len(meta["observation_names"]))
    commands = list(meta.get("command_names", []))
    terms, blocks, offset = [], [], 0
    for name, scale, clip in zip(meta["observation_names"], scales, clips, strict=True):
        if name == "command":
            dims = [COMMAND_DIMS.get(c) for c in commands]
            if None in dims or len(dims) != 1:
                problems.append(f"observation term 'command' ({', '.join(commands)}): only mjlab's twist maps")
                continue
            term, dim, gather = ObsTerm("command", "identity", ("command",), 3, float(scale), float("inf")), 3, None
        else:
            term, dim, gather = _term(name, scale, clip, n, order, problems)
        if term is not None:
            terms.append(term)
            blocks.append(Block(offset, dim, gather))
            offset += dim
    if not problems and offset != obs_dim:
        problems.append(f"the terms add up to {offset} values, the network reads {obs_dim}")
    if control_rate_hz is None:
        problems.append("an mjlab export states no control rate: pass rate_hz= (its velocity tasks run at 50)")
    refuse(str(path), problems)
    inv = None if order is None else [list(order).index(j) for j in range(n)]
    ours = lambda v: v if inv is None else v[inv]  # mjlab joint order -> ours  # noqa: E731
    default, scale = ours(_floats(meta, "default_joint_pos")), ours(_floats(meta, "action_scale"))
    low, high = np.array(robot.joint_low), np.array(robot.joint_high)
    if np.any(default < low) or np.any(default > high):
        raise InteropError(f"{path}: default_joint_pos lies outside {robot.robot}'s joint limits")
    k = float(np.max(np.maximum(high - default, default - low) / scale))  # clip(a/k) binds only beyond the limits
    terms = [ObsTerm(t.name, t.op, t.inputs, t.dim, t.scale * k, t.clip) if t.name == "actions" else t for t in terms]
    wrapped = wrap_policy(model, {net_in.name: blocks}, obs_dim, net_out.name, inv, np.zeros(n), np.full(n, k))
    extra = {
        "joint_names": list(robot.joint_names),
        "default_joint_position": default.tolist(),
        "action_scale": scale.tolist(),
        "servo": {
            "law": "q_des = clip(default + action_scale * action, low, high); tau = kp (q_des - q) - kd dq",
            "kp": ours(_floats(meta, "joint_stiffness")).tolist(),
            "kd": ours(_floats(meta, "joint_damping")).tolist(),
            "torque_limit": list(robot.torque_limit),
        },
        "raw_inputs": robot.raw_inputs,
        "imported": {"format": "mjlab", "onnx": path.name, "action_divisor": k, "run_path": meta.get("run_path")},
    }
    source = {"imported_from": str(path), "format": "mjlab"}
    action = joint_action(robot, default, scale * k)
    return save_bundle(wrapped, out_dir, robot, control_rate_hz, terms, action, extra, source)
