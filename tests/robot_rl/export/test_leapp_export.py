"""`robot-rl export format=leapp`: the pipeline leapp's own loader runs gives our bundle's commands."""

import numpy as np
import pytest
import torch

pytest.importorskip("leapp")


def test_leapp_pipeline_loads_in_leapp_and_matches_the_bundle(quadruped_leapp_run, quadruped_raw_states):
    from leapp import InferenceManager

    from robot_rl.deploy import PolicyRuntime

    yaml_path = quadruped_leapp_run / "leapp" / "quadruped_velocity" / "quadruped_velocity.yaml"
    manager = InferenceManager(str(yaml_path))  # leapp's loader: sha256 of each stage, shapes of every connection
    assert manager.inputs == [f"policy/{k}" for k in ("base_linear_velocity", "angular_velocity", "quaternion",
                                                        "command", "joint_position", "joint_velocity")]  # fmt: skip
    assert manager.feedback_inputs == ["policy/last_action_in"]
    runtime = PolicyRuntime(quadruped_leapp_run / "bundle")
    errors, commands = [], []
    for raw in quadruped_raw_states:
        out = manager({f"policy/{k}": torch.tensor(raw[k], dtype=torch.float32)[None] for k in raw
                       if f"policy/{k}" in manager.inputs})  # fmt: skip
        ours = runtime.act(raw)
        errors.append(np.max(np.abs(out["policy/robot_command"].numpy()[0] - ours)))
        commands.append(ours)
    # the pipeline's feedback (last action) evolves as the runtime's: 300 steps agree, not just the first
    assert max(errors) < 1e-5
    assert np.std(np.array(commands), axis=0).min() > 1e-3  # the robot moved: a constant would not test anything


def test_leapp_pipeline_semantics(quadruped_leapp_run):
    from robot_rl.interop.leapp_pipeline import read_pipeline

    pl = read_pipeline(quadruped_leapp_run / "leapp" / "quadruped_velocity")
    ports = {p.name: p for p in pl.inputs + pl.outputs}
    assert ports["joint_position"].kind == "state/joint/position"
    assert ports["joint_position"].element_names[:3] == ("FR_hip", "FR_thigh", "FR_calf")
    assert ports["quaternion"].element_names == ("x", "y", "z", "w")
    assert ports["robot_command"].kind == "target/joint/position"
    assert pl.configs["frequency"] == 50.0 and pl.configs["robot"] == "go1_like"
    assert pl.feedback == {"last_action_out": "last_action_in"}
