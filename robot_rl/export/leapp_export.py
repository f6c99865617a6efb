"""Our policy as a LEAPP pipeline (what Isaac Lab 3.0's deploy path reads), traced by leapp itself.

One LEAPP node, `policy`, from the raw robot state to the robot command: the bundle's observation layout (in
traced torch ops), the normalizer and MLP, the clip to [-1, 1] and the action mapping to command units within the
limits. Inputs carry semantic kinds and element names (joint names, quaternion order); the last action and any
integrator are LEAPP state (feedback), initialised to zeros as the deploy runtime's reset() does.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from robot_rl.deploy.arm_ik import ARM_ACTION_MODES
from robot_rl.export.bundle_export import bundle_extra
from robot_rl.export.onnx_export import deterministic_actor
from robot_rl.export.traced_layout import build_observation
from robot_rl.interop.conventions import QUAT_XYZW, RAW_FRAMES, RAW_TO_KIND, TARGET_JOINT_POSITION, TARGETS
from sim.tasks.base import Task

NODE = "policy"


def _constants(task: Task) -> dict[str, torch.Tensor]:
    """Layout inputs that are robot constants, baked into the graph (the runtime's constants)."""
    extra = bundle_extra(task)
    consts = {"gravity_direction": [0.0, 0.0, -1.0], **(extra.get("raw_constants") or {})}
    return {k: torch.tensor([v], dtype=torch.float32) for k, v in consts.items()}


def _element_names(name: str, dim: int, extra: dict) -> list[str]:
    if name.startswith("joint_") and len(extra.get("joint_names") or []) == dim:
        return list(extra["joint_names"])
    if name == "quaternion":
        return list(QUAT_XYZW)
    if name == "command" and len((extra.get("command") or {}).get("names") or []) == dim:
        return list(extra["command"]["names"])
    return [f"{name}_{i}" for i in range(dim)] if dim != 3 else ["x", "y", "z"]


def _input_extra(name: str, units: dict) -> dict:
    """What a LEAPP kind leaves open: our raw input's name, its units and (for vectors) the frame it is in."""
    extra = {"robot_rl_input": name, "units": str(units.get(name, ""))}
    if name in RAW_FRAMES:
        extra["frame"] = RAW_FRAMES[name]
    return extra


def measured_inputs(task: Task) -> list[str]:
    """The raw inputs the layout reads that the robot measures (in layout order, each once)."""
    skip = set(_constants(task)) | {"last_action"} | {i["name"] for i in task.integrators}
    names: list[str] = []
    for t in task.obs_layout:
        names += [k for k in t["inputs"] if k not in skip and k not in names]
    return names


def export_leapp(actor, task: Task, raw: dict[str, np.ndarray], out_dir: Path) -> Path:
    """Trace the policy on one robot's raw state `raw` (its measured inputs, batch 1) into out_dir/<task>/;
    leapp validates the exported ONNX against the traced torch code. Returns the pipeline YAML's path."""
    import leapp
    from leapp import TensorSemantics, annotate
    from leapp.utils.tensor_description import GraphConfigs

    if task.action_mode in ARM_ACTION_MODES:
        raise ValueError(
            f"LEAPP export of {task.name} ({task.action_mode} actions): its joint targets come from the deploy "
            "runtime's differential IK (robot_rl/deploy/arm_ik.py), which is not in the traced policy: the damped "
            "least-squares step needs a matrix inverse that torch.onnx cannot convert, its joint-limit pass branches "
            "on the data, and its reference re-anchors on the measured joints; export the bundle (format=bundle)"
        )
    if task.team is not None or task.camera_obs is not None:
        raise ValueError(
            f"LEAPP export covers single-robot state policies with direct commands; {task.name} is not one yet"
        )
    extra = bundle_extra(task)
    spec = task.action_spec
    offset, scale, low, high = (
        torch.tensor([spec[k]], dtype=torch.float32) for k in ("offset", "scale", "low", "high")
    )
    policy = deterministic_actor(actor)
    consts = _constants(task)
    names = measured_inputs(task)
    values = {k: torch.as_tensor(np.asarray(raw[k]), dtype=torch.float32).reshape(1, -1) for k in names}
    action_names = list(extra.get("joint_names") or spec["names"])
    dt = float(task.control_dt)
    units = extra.get("raw_inputs") or (TARGETS[task.robot].raw_inputs if task.robot in TARGETS else {})
    leapp.start(name=str(Path(out_dir).resolve() / task.name))
    try:
        state = {"last_action": torch.zeros(1, len(spec["names"]))}
        state.update({i["name"]: torch.zeros(1, int(i["dim"])) for i in task.integrators})
        for _ in range(2):  # two traced steps: the state's feedback is exercised and validated
            semantics = [
                TensorSemantics(
                    name=k,
                    ref=values[k],
                    kind=RAW_TO_KIND.get(k),
                    element_names=_element_names(k, values[k].shape[-1], extra),
                    extra=_input_extra(k, units),
                )
                for k in names
            ]
            traced = annotate.input_tensors(NODE, semantics)
            traced = traced if isinstance(traced, (tuple, list)) else (traced,)
            kept = annotate.state_tensors(NODE, state)
            kept = kept if isinstance(kept, (tuple, list)) else (kept,)
            r = {**consts, **dict(zip(names, traced, strict=True)), **dict(zip(state, kept, strict=True))}
            new_state = {}
            for integ in task.integrators:  # the runtime's update, before the observation reads it
                a, b = (r[k] for k in integ["inputs"])
                leak = 1.0 - dt / float(integ["leak_s"])
                c = float(integ["clip"])
                r[integ["name"]] = new_state[integ["name"]] = (r[integ["name"]] * leak + (a - b) * dt).clamp(-c, c)
            a = policy(build_observation(task.obs_layout, r)).clamp(-1.0, 1.0)
            command = torch.maximum(torch.minimum(offset + scale * a, high), low)
            annotate.update_state(NODE, {"last_action": a, **new_state})
            kind = TARGET_JOINT_POSITION if task.action_mode == "joint_position" else None
            out = TensorSemantics(
                name="robot_command",  # not "command": that is an input's name (the velocity command)
                ref=command,
                kind=kind,
                element_names=action_names,
                extra={"action_mode": task.action_mode, "units": ", ".join(spec["names"])},
            )
            annotate.output_tensors(NODE, out, export_with="onnx")
            state = {k: v.detach() for k, v in {"last_action": a, **new_state}.items()}
    finally:
        if leapp.ExportManager.is_interpret_graph_enabled():
            leapp.stop()
    configs = GraphConfigs(frequency=1.0 / dt, extra={"robot": task.robot, "task": task.name, "robot_rl": extra})
    if not leapp.compile_graph(visualize=False, graph_configs=configs):
        raise ValueError("leapp's validation of the exported pipeline failed (see its log.txt)")
    return Path(out_dir).resolve() / task.name / f"{task.name}.yaml"
