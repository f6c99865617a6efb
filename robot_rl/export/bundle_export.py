"""Trained actor -> policy.onnx + policy.yaml that the deploy runtime reads without torch."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from robot_rl.deploy.bundle import ActionSpec, PolicyBundle, write_bundle
from robot_rl.deploy.observation import Integrator, ObsTerm
from robot_rl.deploy.plan_executor import PlanSpec
from robot_rl.export.onnx_export import export_onnx
from robot_rl.export.swarm_export import export_swarm_bundle
from robot_rl.policies.swarm_actor import extract_policy
from sim.tasks.base import Task


def bundle_extra(task: Task) -> dict:
    """The task's bundle_extra as plain YAML-able data."""
    return json.loads(json.dumps(task.bundle_extra, default=str))


def export_bundle(actor, task: Task, out_dir: Path, source: dict, plan: PlanSpec | None = None) -> PolicyBundle:
    """Write the bundle for a task's actor into out_dir; returns the validated bundle description.

    The task describes itself: obs_layout (terms), integrators, action_spec (names, offset, scale,
    limits) and, optionally, bundle_extra (e.g. an arm's default pose and IK parameters). A plan-guided
    actor comes with its plan controller (plan_export.plan_spec): its features are observed after the task's.
    """
    if task.camera_obs is not None:
        raise ValueError(
            f"this policy reads camera images ({task.camera_obs}); bundles carry state observation layouts "
            "only, so it cannot be exported yet"
        )
    if task.team is not None:
        # a team task's actor takes every drone's observation; what one drone runs is its shared network
        return export_swarm_bundle(extract_policy(actor), task, out_dir, source)
    out_dir = Path(out_dir)
    layout = list(task.obs_layout)
    if plan is not None:
        from robot_rl.export.plan_export import PLAN_TERM

        layout.append(PLAN_TERM)
    obs_dim = sum(t["dim"] for t in layout)
    export_onnx(actor, obs_dim, out_dir / "policy.onnx")
    spec = task.action_spec
    norm = actor.obs_normalizer
    bundle = PolicyBundle(
        path=out_dir,
        robot=task.robot,
        task=task.name,
        control_rate_hz=1.0 / task.control_dt,
        observation=[ObsTerm.from_dict(t) for t in layout],
        integrators=[Integrator.from_dict(i) for i in task.integrators],
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
            # what the network divides by (EmpiricalNormalization: std + eps): a constant input (a plan's skill
            # that never occurs) has std 0
            "std": [float(x) for x in (norm.std + norm.eps).flatten()],
        },
        source=json.loads(json.dumps(source, default=str)),
        extra=bundle_extra(task),
        plan=plan,
    )
    write_bundle(bundle)
    return bundle
