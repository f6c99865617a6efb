"""An mjlab policy (tests/data/mjlab_go1, mjlab's own export) imported as a bundle, stepped in our quadruped SITL:
sim bridge, policy node and leg safety node as processes over DDS. Three training iterations do not walk; the check
is that the foreign policy runs through the safety layer: armed, every control step commanded, finite, upright."""

from __future__ import annotations

from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

DATA = Path(__file__).parents[1] / "data" / "mjlab_go1"


def test_imported_mjlab_policy_steps_through_the_leg_safety_node(tmp_path):
    from robot_rl_ros.sitl import walk

    from robot_rl.cli import main

    assert main(["import", str(DATA / "policy.onnx"), f"out={tmp_path / 'b'}", "rate_hz=50"]) == 0
    r = walk(str(tmp_path / "b"), command=(0.3, 0.0, 0.0), seconds=3.0, settle_s=1.0)
    assert r["finished"] and r["reason"] == "armed" and r["mode"] == "ACTIVE"  # its per-joint gains were accepted
    assert r["commands"] >= 140  # 50 Hz for 3 s of simulated time, every step through the safety node
    assert r["commands_nonfinite"] == 0 and r["settled_max_command_gap_s"] < 0.05
    assert r["min_trunk_height_m"] > 0.15  # it stood
