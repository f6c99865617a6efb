"""robot-rl import of mjlab's own ONNX export (tests/data/mjlab_go1: made by mjlab 1.6.0's exporter)."""

from pathlib import Path

import numpy as np
import onnx
import pytest

from robot_conventions.frames import quat_wxyz_to_xyzw
from robot_rl.cli import main

DATA = Path(__file__).parents[2] / "data" / "mjlab_go1"


def _meta(key: str) -> np.ndarray:
    props = {p.key: p.value for p in onnx.load(str(DATA / "policy.onnx")).metadata_props}
    return np.array([float(x) for x in props[key].split(",")])


@pytest.fixture(scope="module")
def mjlab_bundle(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("mjlab") / "bundle"
    assert main(["import", str(DATA / "policy.onnx"), f"out={out}", "rate_hz=50"]) == 0
    return out


def _raw(rec, t: int, order: list[int]) -> dict:
    """What our robot's drivers report at step t: joints in our order, the attitude scalar-last."""
    return {
        "base_linear_velocity": rec["imu_lin_vel"][t],
        "angular_velocity": rec["imu_ang_vel"][t],
        "quaternion": quat_wxyz_to_xyzw(rec["quat_wxyz"][t]),
        "joint_position": rec["joint_pos"][t][order],
        "joint_velocity": rec["joint_vel"][t][order],
        "command": rec["command"][t],
    }


def test_runtime_rebuilds_mjlab_observations_and_matches_onnxruntime(mjlab_bundle):
    import onnxruntime as ort

    from robot_rl.deploy import PolicyRuntime

    rec = np.load(DATA / "recorded.npz")
    runtime = PolicyRuntime(mjlab_bundle)
    names = [str(n).removesuffix("_joint") for n in rec["joint_names"]]
    order = [names.index(j) for j in runtime.bundle.extra["joint_names"]]
    mjlab = ort.InferenceSession(str(DATA / "policy.onnx"), providers=["CPUExecutionProvider"])
    default, scale = _meta("default_joint_pos"), _meta("action_scale")
    low, high = runtime.bundle.action.low, runtime.bundle.action.high
    obs_err, act_err, commands = [], [], []
    for t in range(len(rec["obs"])):
        command = runtime.act(_raw(rec, t, order))  # its own last action: the `actions` term comes from the runtime
        a = mjlab.run(None, {"obs": rec["obs"][t : t + 1].astype(np.float32)})[0][0]
        want = np.clip((default + scale * a)[order], low, high)  # mjlab's JointPositionAction, within our limits
        obs_err.append(np.max(np.abs(runtime.last_observation - rec["obs"][t][np.r_[0:9, 9 + np.array(order),
                       21 + np.array(order), 33 + np.array(order), 45:48]])))  # fmt: skip
        act_err.append(np.max(np.abs(command - want)))
        commands.append(command)
    assert max(obs_err) < 1e-5  # projected gravity from the quaternion, joints minus defaults, the last action
    assert max(act_err) < 1e-5
    assert np.std(np.array(commands), axis=0).min() > 1e-3 and len(commands) == 100


def test_bundle_carries_mjlab_gains_and_defaults(mjlab_bundle):
    from robot_rl.deploy import load_bundle

    b = load_bundle(mjlab_bundle)
    assert b.robot == "go1_like" and b.control_rate_hz == 50.0
    assert b.extra["servo"]["kp"] == pytest.approx(_meta("joint_stiffness").tolist())
    assert b.extra["default_joint_position"][:3] == pytest.approx([0.1, 0.9, -1.8])  # mjlab's home pose, not ours
    assert [t.name for t in b.observation] == ["base_lin_vel", "base_ang_vel", "projected_gravity", "joint_pos",
                                               "joint_vel", "actions", "command"]  # fmt: skip


def _edited(tmp_path: Path, key: str, value: str) -> Path:
    """mjlab's file with one metadata entry changed, as another task's or robot's export would carry it."""
    model = onnx.load(str(DATA / "policy.onnx"))
    for p in model.metadata_props:
        if p.key == key:
            p.value = value
    out = tmp_path / "edited.onnx"
    onnx.save(model, str(out))
    return out


@pytest.mark.parametrize(
    ("key", "edit", "named"),
    [
        ("joint_names", lambda v: v.replace("RL_calf_joint", "tail_joint"), ["unknown joint 'tail_joint'",
                                                                            "no joint 'RL_calf'"]),
        ("observation_names", lambda v: v.replace("command", "height_scan"), ["observation term 'height_scan'"]),
        ("joint_names", lambda v: ",".join(v.split(",")[:8]), ["action size 12 (8 joint names)"]),
    ],
    ids=["unknown_joint", "missing_observation_term", "action_size"],
)  # fmt: skip
def test_unmappable_exports_are_refused_naming_each_item(tmp_path, capsys, key, edit, named):
    value = {p.key: p.value for p in onnx.load(str(DATA / "policy.onnx")).metadata_props}[key]
    path = _edited(tmp_path, key, edit(value))
    code = main(["import", str(path), f"out={tmp_path / 'b'}", "rate_hz=50"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "\n" not in err and err.startswith("robot-rl: error:")
    for item in named:
        assert item in err, err
    assert not (tmp_path / "b").exists()


def test_an_mjlab_export_needs_a_rate(tmp_path, capsys):
    assert main(["import", str(DATA / "policy.onnx"), f"out={tmp_path / 'b'}"]) == 2
    assert "rate_hz=" in capsys.readouterr().err
