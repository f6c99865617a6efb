"""A LEAPP pipeline (Isaac Lab 3.0's export, or ours) -> one of our bundles.

The pipeline's inputs are raw robot state with semantic kinds and element names; each becomes one identity term of
our observation layout (projected gravity: from the attitude), reordered inside the ONNX where the pipeline's joint
or quaternion order differs from ours. The output becomes the bundle's action, scaled so that our runtime's clip to
[-1, 1] is exactly the clip to the limits (offset: mid-range, scale: half-range): for a jointed robot a
joint-position-target output (by joint names), for the Crazyflie a command whose element names are one of its
off-board modes' (rpyt: roll_deg, pitch_deg, yaw_rate_deg_s, thrust_pwm; ctbr), in any order: LEAPP has no kind for
attitude + thrust, so the names, which carry the units, decide.
Feedback (last action, integrators, history, hidden state) becomes the bundle's recurrent state, initialised as the
pipeline says.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx

from robot_rl.deploy.bundle import PolicyBundle, RecurrentState
from robot_rl.interop.conventions import TARGET_JOINT_POSITION, TargetRobot
from robot_rl.interop.imported_bundle import command_action, joint_action, save_bundle
from robot_rl.interop.leapp_pipeline import LeappPipeline, read_pipeline
from robot_rl.interop.mapping import joint_order, map_input, refuse
from robot_rl.interop.onnx_wrap import Block, wrap_policy


def _command_output(pl: LeappPipeline, robot: TargetRobot, problems: list[str]):
    """A robot without joints: the one external output, its element names one of the robot's command modes."""
    ports = {p.name: p for p in pl.outputs}
    if len(pl.external_outputs) != 1:
        problems.append(f"{len(pl.external_outputs)} outputs ({', '.join(pl.external_outputs)}), expected 1 command")
        return None, None, None
    out = ports[pl.external_outputs[0]]
    label = f"output '{out.name}'" + (f" ({out.kind})" if out.kind else "")
    if out.kind is not None:
        problems.append(f"{label}: {robot.robot} takes no {out.kind} (only {', '.join(robot.commands)} commands)")
        return None, None, None
    if out.element_names is None:
        problems.append(f"{label}: no element names, so the command and its units are unknown")
        return None, None, None
    names = list(out.element_names)
    for mode, spec in robot.commands.items():
        if sorted(names) == sorted(spec["names"]) and len(set(names)) == len(names):
            said = out.extra.get("action_mode")
            if said is not None and said != mode:
                problems.append(f"{label}: says action_mode {said!r} but its names are {mode}'s")
                return None, None, None
            idx = [names.index(n) for n in spec["names"]]  # ours[j] = network[idx[j]]
            return out, (None if idx == list(range(len(idx))) else idx), mode
    known = "; ".join(f"{m}: {', '.join(s['names'])}" for m, s in robot.commands.items())
    problems.append(f"{label}: command [{', '.join(names)}] is none of {robot.robot}'s ({known})")
    return None, None, None


def _action_output(pl: LeappPipeline, robot: TargetRobot, problems: list[str]):
    if not robot.joint_names:
        return _command_output(pl, robot, problems)
    ports = {p.name: p for p in pl.outputs}
    targets = [ports[n] for n in pl.external_outputs if ports[n].kind == TARGET_JOINT_POSITION]
    others = [n for n in pl.external_outputs if ports[n].kind != TARGET_JOINT_POSITION]
    problems += [f"output '{n}' ({ports[n].kind or 'no kind'}): not a joint position target" for n in others]
    if len(targets) != 1:
        problems.append(f"{len(targets)} joint position target outputs, expected 1")
        return None, None, None
    out = targets[0]
    n = len(robot.joint_names)
    if out.dim != n:
        problems.append(f"output '{out.name}': action size {out.dim}, {robot.robot} has {n} joints")
        return None, None, None
    if out.element_names is None:
        problems.append(f"output '{out.name}': no joint names, so the joint order is unknown")
        return None, None, None
    order, bad = joint_order(list(out.element_names), robot, f"output '{out.name}'")
    problems += bad
    if bad:
        return None, None, None
    # ours[j] = network[pos of our joint j]: the inverse of the network->ours index map
    inverse = None if order is None else [list(order).index(j) for j in range(n)]
    return out, inverse, "joint_position"


def import_leapp(
    path: str | Path, robot: TargetRobot, out_dir: Path, control_rate_hz: float | None = None
) -> PolicyBundle:
    """Map and write the bundle; raises InteropError naming every input, joint or size that cannot be mapped."""
    pl = read_pipeline(path)
    problems: list[str] = []
    ports = {p.name: p for p in pl.inputs}
    terms, feeds, offset = [], {}, 0
    for name in pl.external_inputs:
        p = ports[name]
        if len(p.shape) != 2 or p.shape[0] != 1:
            problems.append(f"input '{name}': shape {list(p.shape)}, expected [1, n]")
            continue
        mapped, bad = map_input(name, p.kind, p.dim, p.element_names, robot, p.extra)
        problems += bad
        if mapped is not None:
            terms.append(mapped.term)
            feeds[name] = [Block(offset, p.dim, mapped.gather)]
            offset += p.dim
    fed_back = set(pl.feedback.values())
    problems += [f"input '{n}': neither fed by the robot nor by feedback" for n in ports if n not in feeds and
                 n not in fed_back and n not in pl.external_inputs]  # fmt: skip
    out, order, mode = _action_output(pl, robot, problems)
    rate = control_rate_hz or pl.configs.get("frequency")
    if not rate:
        problems.append("the pipeline states no control rate (configs.frequency): pass rate_hz=")
    refuse(str(pl.path), problems)
    if mode == "joint_position":
        action = joint_action(robot, *_mid_half(robot.joint_low, robot.joint_high))
    else:
        action = command_action(robot, mode)
    mid, half = action.offset, action.scale
    model = wrap_policy(onnx.load(str(pl.onnx_path)), feeds, offset, out.name, order, mid, half)
    state = [
        RecurrentState(inp, outp, tuple(np.ravel(pl.initial.get(inp, np.zeros(ports[inp].dim))).tolist()))
        for outp, inp in pl.feedback.items()
    ]
    ours = pl.configs.get("robot_rl") if pl.configs.get("robot") == robot.robot else None
    extra = (
        {"joint_names": list(robot.joint_names), "raw_inputs": robot.raw_inputs}
        if robot.joint_names
        else {"raw_inputs": robot.raw_inputs}
    )
    if isinstance(ours, dict):  # our own export: servo gains, command ranges and the home pose travel along
        extra.update({k: ours[k] for k in ("servo", "command", "default_joint_position") if k in ours})
    extra["imported"] = {
        "format": "leapp",
        "pipeline": pl.path.name,
        "stage": pl.stage,
        "inputs": {t.name: list(t.inputs) for t in terms},
        "action_output": out.name,
        "leapp_version": str(pl.versions.get("leapp version", "")),
    }
    source = {"imported_from": str(pl.path), "format": "leapp", "stage_sha256": _sha(pl.onnx_path)}
    return save_bundle(model, out_dir, robot, float(rate), terms, action, extra, source, state)


def _mid_half(low, high) -> tuple[np.ndarray, np.ndarray]:
    low, high = np.array(low), np.array(high)
    return (low + high) / 2, (high - low) / 2


def _sha(path: Path) -> str:
    import hashlib

    return hashlib.sha256(path.read_bytes()).hexdigest()
