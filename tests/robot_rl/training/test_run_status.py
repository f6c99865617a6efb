"""Every run ends in a true status, and init_from / resume do what they say (issue 23, item 3)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from robot_rl import commands
from robot_rl.config import ConfigError, load_config
from robot_rl.store import Store, index_run
from robot_rl.store.run_status import true_status
from robot_rl.training.checkpoint import latest_checkpoint, load_checkpoint

ROOT = Path(__file__).resolve().parents[3]
TINY = ["task.num_worlds=16", "algo.num_steps_per_env=8", "train.progress=false", "train.save_every=1"]


def _start_training(root: Path) -> tuple[subprocess.Popen, Path]:
    """`robot-rl train` in its own process, returned once its run is training (its first checkpoint is written)."""
    cmd = [sys.executable, "-m", "robot_rl.cli", "train", f"runs_root={root}", "run_name=r", "train.iterations=100000"]
    p = subprocess.Popen([*cmd, *TINY], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    run = root / "r"
    deadline = time.monotonic() + 120
    while not list(run.glob("checkpoints/model_*.pt")):
        assert p.poll() is None, p.stderr.read().decode()[-2000:]
        assert time.monotonic() < deadline, "no checkpoint within 120 s"
        time.sleep(0.05)
    return p, run


def _meta(run: Path) -> dict:
    return json.loads((run / "meta.json").read_text())


def test_a_killed_run_is_interrupted(tmp_path):
    p, run = _start_training(tmp_path)
    assert true_status(_meta(run)) == "running"
    store = Store(tmp_path / "store.sqlite")
    index_run(store, run)  # indexed while it trains, as the dashboard's re-indexer does
    assert store.get_run("r")["status"] == "running"
    store.close()
    os.kill(p.pid, signal.SIGKILL)  # nothing of ours runs: meta.json still says running
    p.wait()
    meta = _meta(run)
    assert meta["status"] == "running" and meta["pid"] == p.pid
    assert true_status(meta) == "interrupted"
    store = Store(tmp_path / "store.sqlite")
    assert index_run(store, run) == "r"
    assert store.get_run("r")["status"] == "interrupted"
    store.close()


def test_sigterm_ends_the_run_interrupted(tmp_path):
    p, run = _start_training(tmp_path)
    p.send_signal(signal.SIGTERM)
    assert p.wait(timeout=60) == 130
    meta = _meta(run)
    assert meta["status"] == "interrupted" and meta["finished_at"]
    load_checkpoint(latest_checkpoint(run))  # intact


def test_init_from_trains_the_requested_iterations_and_a_finished_run_needs_a_flag(tmp_path):
    common = [f"runs_root={tmp_path}", *TINY]
    (stage1,) = commands.cmd_train([*common, "run_name=s1", "train.iterations=3"])
    (stage2,) = commands.cmd_train([*common, "run_name=s2", "train.iterations=2", f"init_from={stage1}"])
    meta = _meta(stage2)
    assert meta["status"] == "finished" and meta["iterations"] == 2
    assert sorted(p.name for p in (stage2 / "checkpoints").glob("model_*.pt")) == ["model_1.pt", "model_2.pt"]
    steps_per_iteration = 16 * 8
    assert load_checkpoint(latest_checkpoint(stage2))["total_steps"] == (3 + 2) * steps_per_iteration
    with pytest.raises(ConfigError, match="is finished; resume_finished=true trains it further"):
        commands.cmd_train([f"resume={stage2}", "train.iterations=4"])
    assert load_config([f"resume={stage2}", "resume_finished=true"]).resume_finished is True
    commands.cmd_train([f"resume={stage2}", "train.iterations=4", "resume_finished=true"])
    assert _meta(stage2)["iterations"] == 4
