"""Trained actor -> policy.onnx + policy.yaml that the deploy runtime reads without torch."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import numpy as np
import torch

from robot_rl.deploy.bundle import ActionSpec, PolicyBundle, write_bundle
from robot_rl.deploy.observation import Integrator, ObsTerm


class _ExportedActor(torch.nn.Module):
    """Normalizer + MLP, deterministic mean action: what runs on the robot."""

    def __init__(self, actor):
        super().__init__()
        self.normalizer = copy.deepcopy(actor.obs_normalizer).cpu().eval()
        self.mlp = copy.deepcopy(actor.mlp).cpu().eval()

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return self.mlp(self.normalizer(obs))


def export_onnx(actor, obs_dim: int, path: Path) -> None:
    """An rsl_rl actor (normalizer + MLP) as ONNX."""
    export_module_onnx(_ExportedActor(actor), obs_dim, path)


def export_module_onnx(model: torch.nn.Module, obs_dim: int, path: Path) -> None:
    """ONNX of a policy module: input 'obs' (batch, obs_dim) float32, output 'actions' (batch, ...), opset 18."""
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.onnx.export(
        model.eval(),
        (torch.zeros(1, obs_dim),),
        str(path),
        input_names=["obs"],
        output_names=["actions"],
        dynamic_axes={"obs": {0: "batch"}, "actions": {0: "batch"}},
        opset_version=18,
        dynamo=False,
    )


def bundle_extra(task) -> dict:
    """The task's bundle_extra as plain YAML-able data.

    A joint-mode arm task writes ik: null, but the runtime still needs the joint limits, their margin
    and max_target_lead to integrate joint deltas as the simulator does: take them from the task's IK.
    """
    extra = dict(getattr(task, "bundle_extra", None) or {})
    if "ik" in extra and extra["ik"] is None and hasattr(getattr(task, "ik", None), "spec"):
        extra["ik"] = task.ik.spec()
    return json.loads(json.dumps(extra, default=str))


def export_bundle(actor, task, out_dir: Path, source: dict) -> PolicyBundle:
    """Write the bundle for a task's actor into out_dir; returns the validated bundle description.

    The task describes itself: obs_layout (terms), integrators, action_spec (names, offset, scale,
    limits) and, optionally, bundle_extra (e.g. an arm's default pose and IK parameters).
    """
    if getattr(task, "camera_obs", None) is not None:
        raise ValueError(
            f"this policy reads camera images ({task.camera_obs}); bundles carry state observation layouts "
            "only, so it cannot be exported yet"
        )
    if hasattr(task, "per_drone_obs_dim"):
        # a team task's actor takes every drone's observation; what one drone runs is its shared network
        from robot_rl.export.swarm_export import export_swarm_bundle
        from robot_rl.policies.swarm_actor import extract_policy

        return export_swarm_bundle(extract_policy(actor), task, out_dir, source)
    out_dir = Path(out_dir)
    obs_dim = sum(t["dim"] for t in task.obs_layout)
    export_onnx(actor, obs_dim, out_dir / "policy.onnx")
    spec = task.action_spec
    norm = actor.obs_normalizer
    bundle = PolicyBundle(
        path=out_dir,
        robot=task.robot,
        task=task.name,
        control_rate_hz=1.0 / task.control_dt,
        observation=[ObsTerm.from_dict(t) for t in task.obs_layout],
        integrators=[Integrator.from_dict(i) for i in getattr(task, "integrators", [])],
        action=ActionSpec(
            mode=task.action_mode,
            names=list(spec["names"]),
            offset=np.array(spec["offset"]),
            scale=np.array(spec["scale"]),
            low=np.array(spec["low"]),
            high=np.array(spec["high"]),
        ),
        onnx_file="policy.onnx",
        onnx_sha256="",
        normalizer={
            "applied_in_onnx": True,
            "mean": [float(x) for x in norm.mean.flatten()],
            "std": [float(x) for x in norm.std.flatten()],
        },
        source=json.loads(json.dumps(source, default=str)),
        extra=bundle_extra(task),
    )
    write_bundle(bundle)
    return bundle
