"""Issue 18 acceptance 4 for the off-policy learners, across processes: two training processes with one seed
hold bitwise-equal networks after the first 100+ gradient updates; a run killed with SIGKILL at random instants
resumes from a checkpoint whose learner, optimizers, observation normalizer, RNG streams and replay ring are
exactly what was saved (or a warm restart that says why, when the kill fell between the two files' writes)."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from omegaconf import OmegaConf

from robot_rl.training.checkpoint import latest_checkpoint, load_checkpoint, read_data

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[4]
TRAIN = [sys.executable, "-m", "robot_rl.cli", "train"]


def _train(args: list[str], **popen) -> subprocess.Popen:
    return subprocess.Popen([*TRAIN, *args], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, **popen)


def _equal(a, b) -> bool:
    """Nested dicts/lists/tuples of tensors and plain values, compared exactly."""
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.dtype == b.dtype and torch.equal(a, b)
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_equal(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple):
        return isinstance(b, list | tuple) and len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b, strict=True))
    return a == b


def test_two_processes_with_one_seed_train_bitwise_equal_networks(tmp_path, fast_overrides):
    common = [*fast_overrides, "algo=sac", "seed=5", "train.iterations=8", f"runs_root={tmp_path}"]
    procs = [_train([*common, f"run_name=p{i}"]) for i in range(2)]
    for p in procs:
        _, err = p.communicate(timeout=600)
        assert p.returncode == 0, err.decode()[-2000:]
    a, b = (load_checkpoint(latest_checkpoint(tmp_path / f"p{i}")) for i in range(2))
    assert a["updates"] == b["updates"] >= 100
    assert _equal(a["agent_state_dict"], b["agent_state_dict"])  # actor, twin critics, targets, alpha, normalizer
    assert _equal(a["optimizer_state_dict"], b["optimizer_state_dict"])


def _restored(run: Path) -> tuple[object, dict, str]:
    """A fresh trainer loaded from the run's latest checkpoint, its replay ring read back (zero iterations)."""
    from robot_rl.commands.common import run_config
    from robot_rl.envs import make_env
    from robot_rl.training.checkpoint import task_config_hash
    from robot_rl.training.learners import make_trainer

    cfg = run_config(run, [])
    env = make_env(cfg, final_observation=True)
    trainer = make_trainer(env, OmegaConf.to_container(cfg.algo, resolve=True), config_hash=task_config_hash(cfg.task))
    ckpt = latest_checkpoint(run)
    trainer.load(ckpt)
    saved = load_checkpoint(ckpt)
    trainer.learn(trainer.iteration, progress=False)  # nothing left to train: only reads the replay ring
    return trainer, saved, trainer.resume_note


def test_killed_at_random_instants_resumes_exactly_what_was_saved(tmp_path, fast_overrides):
    from robot_rl.training.off_policy.trainer import REPLAY_FILE
    from robot_rl.training.ppo_trainer import rng_state

    rng = random.Random(18)
    run = tmp_path / "killed"
    common = [*fast_overrides, "algo=td3", "train.save_every=1", "train.iterations=100000"]
    cmd = [*common, f"runs_root={tmp_path}", "run_name=killed"]
    restored_rings, iterations = 0, []
    for _ in range(3):
        p = _train(cmd, start_new_session=True)
        before = len(list(run.glob("checkpoints/model_*.pt")))
        deadline = time.time() + 120
        while time.time() < deadline and p.poll() is None and len(list(run.glob("checkpoints/model_*.pt"))) <= before:
            time.sleep(0.05)
        assert p.poll() is None, p.stderr.read().decode()[-2000:]
        time.sleep(rng.uniform(0.0, 0.5))
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()
        trainer, saved, note = _restored(run)
        iterations.append(saved["iteration"])
        state = trainer.state_dict()
        for key in ("agent_state_dict", "optimizer_state_dict", "updates", "update_budget", "iteration", "total_steps"):
            assert _equal(state[key], saved[key]), key
        assert _equal(rng_state(trainer.env), saved["rng"])  # torch, numpy, python and the env's streams
        replay = read_data(run / "checkpoints" / REPLAY_FILE) if "restored" in note else None
        if replay is not None:
            assert replay["iteration"] == saved["iteration"]
            assert _equal(trainer.buffer.state_dict(), replay["buffer"])
            restored_rings += 1
        else:  # the kill fell after the ring's write and before the model's: a warm restart, said so
            assert "warm restart" in note, note
        cmd = [*common, f"resume={run}"]
    assert restored_rings >= 1
    assert iterations == sorted(iterations) and len(set(iterations)) == 3  # each resume trained on from the last
