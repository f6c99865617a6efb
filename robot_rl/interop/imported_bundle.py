"""An imported policy written as one of our bundles: the wrapped ONNX, policy.yaml sealed and validated."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx

from robot_rl.deploy.bundle import ActionSpec, PolicyBundle, RecurrentState, load_bundle, write_bundle
from robot_rl.deploy.observation import ObsTerm
from robot_rl.interop.conventions import TargetRobot


def joint_action(robot: TargetRobot, offset: np.ndarray, scale: np.ndarray) -> ActionSpec:
    """Joint position targets within our robot's joint limits."""
    return ActionSpec(
        mode="joint_position",
        names=robot.action_names,
        offset=np.asarray(offset, dtype=np.float64),
        scale=np.asarray(scale, dtype=np.float64),
        low=np.array(robot.joint_low),
        high=np.array(robot.joint_high),
    )


def command_action(robot: TargetRobot, mode: str) -> ActionSpec:
    """One of the robot's command modes (our ACTION_SPECS entry), rescaled like joint targets: offset mid-range,
    scale half-range, so the runtime's clip to [-1, 1] is the clip to the command limits and nothing else."""
    spec = robot.commands[mode]
    low, high = np.array(spec["low"], dtype=np.float64), np.array(spec["high"], dtype=np.float64)
    return ActionSpec(mode=mode, names=list(spec["names"]), offset=(low + high) / 2, scale=(high - low) / 2,
                      low=low, high=high)  # fmt: skip


def save_bundle(
    model: onnx.ModelProto,
    out_dir: Path,
    robot: TargetRobot,
    control_rate_hz: float,
    terms: list[ObsTerm],
    action: ActionSpec,
    extra: dict,
    source: dict,
    state: list[RecurrentState] | None = None,
) -> PolicyBundle:
    """Write out_dir/policy.onnx + policy.yaml and load them back as a robot would (refused if invalid)."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(out_dir / "policy.onnx"))
    bundle = PolicyBundle(
        path=out_dir,
        robot=robot.robot,
        task=robot.task,
        control_rate_hz=float(control_rate_hz),
        observation=terms,
        action=action,
        onnx_file="policy.onnx",
        onnx_sha256="",
        normalizer={"applied_in_onnx": True},
        source=source,
        extra=extra,
        state=list(state or []),
    )
    write_bundle(bundle)
    return load_bundle(out_dir)
