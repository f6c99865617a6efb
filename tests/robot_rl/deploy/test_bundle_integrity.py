"""Bundles know what they are (issue 24, item 5): one integrity hash covers policy.onnx and policy.yaml, and the
loader refuses what no export writes, each in one line (load_bundle, pre-arm check, `robot-rl sitl`).

The bundle is the committed hover policy (tests/data/crazyflie_hover_ppo) exported by today's code.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from robot_rl.deploy import BundleError, PolicyRuntime, load_bundle
from robot_rl.deploy.bundle import integrity_hash, sha256_file

ROOT = Path(__file__).resolve().parents[3]


def _copy(bundle: Path, tmp_path: Path) -> tuple[Path, dict]:
    b = tmp_path / "bundle"
    shutil.copytree(bundle, b)
    return b, yaml.safe_load((b / "policy.yaml").read_text())


def _write(b: Path, doc: dict, reseal: bool = False) -> None:
    """Write policy.yaml; reseal: with a hash recomputed for the edit (someone who knows the scheme)."""
    if reseal:
        doc = yaml.safe_load(yaml.safe_dump(doc))
        doc["integrity"]["sha256"] = integrity_hash(doc, sha256_file(b / "policy.onnx"))
    (b / "policy.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))


def _refused(b: Path, match: str) -> str:
    with pytest.raises(BundleError, match=match) as e:
        load_bundle(b)
    assert "\n" not in str(e.value)
    return str(e.value)


def _swap_terms(doc: dict) -> dict:
    terms = doc["observation"]["terms"]
    i, j = [k for k, t in enumerate(terms) if t["name"] in ("goal_error_body", "velocity_body")]
    assert terms[i]["dim"] == terms[j]["dim"] == 3  # same size: no size check can see the swap
    terms[i], terms[j] = terms[j], terms[i]
    return doc


def test_exported_bundle_loads_and_its_hash_ignores_layout_of_the_text(trained_bundle, tmp_path):
    b, doc = _copy(trained_bundle, tmp_path)
    load_bundle(b)
    # key order, flow style and comments are not content: the same document still loads
    text = yaml.safe_dump(doc, sort_keys=True, default_flow_style=True)
    (b / "policy.yaml").write_text("# re-dumped by hand\n" + text)
    assert load_bundle(b).obs_dim == 25


def test_swapped_same_size_observation_terms_are_refused(trained_bundle, tmp_path):
    b, doc = _copy(trained_bundle, tmp_path)
    _write(b, _swap_terms(doc))
    line = _refused(b, "edited after export")
    with pytest.raises(BundleError, match="edited after export"):
        PolicyRuntime(b)
    from robot_rl_ros.prearm import RobotSpec, check_bundle

    _, problems = check_bundle(str(b), RobotSpec())
    assert problems == [f"bundle: {line}"]
    # through the CLI: one line, exit code 2
    env = dict(os.environ, MUJOCO_GL="egl")
    p = subprocess.run([sys.executable, "-m", "robot_rl.cli", "sitl", f"bundle={b}", "ros=false"], cwd=ROOT, env=env,
                       capture_output=True, text=True)  # fmt: skip
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert p.returncode == 2 and len(lines) == 1 and "edited after export" in lines[0], p.stderr


def test_swapped_action_limits_are_refused_with_or_without_a_matching_hash(trained_bundle, tmp_path):
    b, doc = _copy(trained_bundle, tmp_path)
    a = doc["action"]
    a["low"], a["high"] = a["high"], a["low"]
    _write(b, doc)
    _refused(b, "edited after export")
    _write(b, doc, reseal=True)
    _refused(b, "action 'roll_deg' has low 30 >= high -30")


@pytest.mark.parametrize(
    "edit,message",
    [
        (lambda d: d["action"]["offset"].__setitem__(3, 70000.0), "offset 70000 lies outside"),
        (lambda d: d["action"]["scale"].__setitem__(0, -30.0), "scale -30 must be positive"),
        (lambda d: d["normalizer"]["mean"].pop(), "normalizer.mean has 24 values, the observation 25"),
        (lambda d: d["normalizer"]["std"].__setitem__(2, 0.0), "normalizer.std must be finite and positive"),
        (lambda d: d["extra"].__setitem__("hover_quaternion", [0.0, 0.0, 0.0, 0.0]), "not a unit quaternion"),
        (lambda d: d["observation"]["terms"][0].__setitem__("scale", 0.0), "finite non-zero scale"),
    ],
    ids=["offset_outside_limits", "negative_scale", "normalizer_size", "zero_std", "zero_quaternion", "zero_scale"],
)
def test_semantic_checks_refuse_what_no_export_writes(trained_bundle, tmp_path, edit, message):
    b, doc = _copy(trained_bundle, tmp_path)
    edit(doc)
    _write(b, doc, reseal=True)  # the hash matches: only the meaning is wrong
    _refused(b, message)


def test_a_unit_quaternion_in_extra_passes(trained_bundle, tmp_path):
    b, doc = _copy(trained_bundle, tmp_path)
    doc["extra"]["hover_quaternion"] = [0.0, 0.0, float(np.sin(0.3)), float(np.cos(0.3))]
    _write(b, doc, reseal=True)
    load_bundle(b)


def test_layout_of_another_size_than_the_network_input_is_refused(trained_bundle, tmp_path):
    b, doc = _copy(trained_bundle, tmp_path)
    obs = doc["observation"]
    dropped = obs["terms"].pop()  # goal_error_integral (3)
    obs["size"] -= dropped["dim"]
    for k in ("mean", "std"):
        doc["normalizer"][k] = doc["normalizer"][k][: obs["size"]]
    _write(b, doc, reseal=True)
    _refused(b, "ONNX input size 25 does not match observation layout size 22")


def test_old_and_unsealed_bundles_are_refused_with_what_to_do(trained_bundle, tmp_path):
    b, doc = _copy(trained_bundle, tmp_path)
    del doc["integrity"]
    _write(b, doc)
    _refused(b, "no integrity.sha256.*re-export it")
    doc["schema_version"] = 1
    _write(b, doc)
    _refused(b, "schema_version 1 bundles hash policy.onnx only.*re-export it")


def test_binary_policy_yaml_is_one_line(tmp_path):
    (tmp_path / "policy.yaml").write_bytes(b"\xff\xfe\x00binary")
    with pytest.raises(BundleError, match="not text"):
        load_bundle(tmp_path)


@pytest.mark.parametrize(
    ("servo", "expected"),
    [({"kp": 20.0, "kd": 0.5}, (np.full(3, 20.0), np.full(3, 0.5))),  # one gain for every motor (ours)
     ({"kp": [1.0, 2.0, 3.0], "kd": [0.1, 0.2, 0.3]}, (np.array([1.0, 2.0, 3.0]), np.array([0.1, 0.2, 0.3])))],
)  # fmt: skip
def test_servo_gains_broadcast_to_every_motor(trained_bundle, servo, expected):
    bundle = load_bundle(trained_bundle)
    bundle.extra = {**bundle.extra, "servo": servo}
    for got, want in zip(bundle.servo_gains(3), expected, strict=True):
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("servo", [None, {"kp": 1.0}, {"kp": [1.0, 2.0], "kd": 0.1}, "stiff"])
def test_missing_or_misshapen_servo_gains_are_one_clear_error(trained_bundle, servo):
    bundle = load_bundle(trained_bundle)
    bundle.extra = {**bundle.extra, "servo": servo}
    with pytest.raises(BundleError, match=r"carries no servo gains for 3 motors \(extra.servo.kp, extra.servo.kd\)"):
        bundle.servo_gains(3)
