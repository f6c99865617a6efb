"""bench/gpu_throughput.py --smoke runs (on warp's CPU device here) and prints a table row with its measurements."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("mujoco_warp")

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_gpu_throughput_smoke_prints_env_raw_training_and_camera_rates():
    env = {**os.environ, "MUJOCO_GL": os.environ.get("MUJOCO_GL", "egl")}
    res = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "gpu_throughput.py"), "--smoke"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    number = r"\s+([\d,.]+)"
    row = re.search(r"^crazyflie_hover\s+16" + 7 * number + "$", res.stdout, re.M)
    assert row, res.stdout
    env_sps, raw_sps, ratio, train_sps, _, _, capture_s = (float(g.replace(",", "")) for g in row.groups())
    assert env_sps > 0 and raw_sps > 0 and train_sps > 0
    assert 0 < capture_s < 30  # the substeps were captured as a graph, and the capture is reported apart
    assert ratio == pytest.approx(env_sps / raw_sps, abs=0.01)  # the ratio is of the two rates it prints
    cam = re.search(r"^\s+4\s+([\d,]+)\s+([\d,]+)\s+([\d.]+)\s+([\d,]+)\s+([\d,]+)$", res.stdout, re.M)
    assert cam, res.stdout
    mujoco_env, mjwarp_env, cam_ratio, mujoco_fps, mjwarp_fps = (float(g.replace(",", "")) for g in cam.groups())
    assert min(mujoco_env, mjwarp_env, mujoco_fps, mjwarp_fps) > 0
    assert cam_ratio == pytest.approx(mjwarp_env / mujoco_env, rel=0.05)  # of the rates before rounding
