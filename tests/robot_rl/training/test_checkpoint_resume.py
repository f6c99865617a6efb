"""Checkpoints survive kill -9 at any instant, and resuming restores exactly what was saved."""

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from robot_rl.training.checkpoint import latest_checkpoint, load_checkpoint

ROOT = Path(__file__).resolve().parents[3]


def _equal(a, b) -> bool:
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.shape == b.shape and torch.equal(a, b)
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_equal(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b, strict=True))
    try:
        import numpy as np

        if isinstance(a, np.ndarray):
            return np.array_equal(a, b)
    except ImportError:
        pass
    return a == b


def test_resume_restores_policy_optimizer_normalizer_rng_iteration(tiny_run):
    from omegaconf import OmegaConf

    from robot_rl.envs import make_env
    from robot_rl.training.ppo_trainer import PPOTrainer

    ckpt_path = latest_checkpoint(tiny_run)
    saved = load_checkpoint(ckpt_path)
    cfg = OmegaConf.load(tiny_run / "config.yaml")
    env = make_env(cfg, num_worlds=64, seed=999)  # a different seed: everything must come from the file
    trainer = PPOTrainer(env, OmegaConf.to_container(cfg.algo, resolve=True))
    assert not _equal(trainer.state_dict()["actor_state_dict"], saved["actor_state_dict"])
    trainer.load(ckpt_path)
    restored = trainer.state_dict()
    for key in ("actor_state_dict", "critic_state_dict", "optimizer_state_dict", "iteration", "rng"):
        assert _equal(restored[key], saved[key]), key
    assert restored["iteration"] == 3
    # the normalizer statistics live in the actor's state dict
    assert any("obs_normalizer" in k for k in saved["actor_state_dict"])


@pytest.mark.slow
def test_kill_minus_nine_at_random_instants_never_corrupts_checkpoints(tmp_path):
    rng = random.Random(1234)
    run = tmp_path / "killed"
    base = [sys.executable, "-m", "robot_rl.cli", "train"]
    common = ["task.num_worlds=32", "train.save_every=1", "train.progress=false", "algo.num_steps_per_env=8"]
    kills = 0
    first = [*base, f"runs_root={tmp_path}", "run_name=killed", "train.iterations=100000", *common]
    cmd = first
    while kills < 10:  # 10 random instants (20 cost 190 s of CI)
        p = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
        # wait until this process has written at least one new checkpoint, then kill at a random instant
        start_count = len(list((run / "checkpoints").glob("model_*.pt"))) if (run / "checkpoints").exists() else 0
        deadline = time.time() + 60
        while time.time() < deadline and p.poll() is None:
            n = len(list((run / "checkpoints").glob("model_*.pt"))) if (run / "checkpoints").exists() else 0
            if n > start_count:
                break
            time.sleep(0.05)
        assert p.poll() is None, p.stderr.read().decode()[-2000:]
        time.sleep(rng.uniform(0.0, 0.6))
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()
        kills += 1
        for ckpt in (run / "checkpoints").glob("model_*.pt"):
            load_checkpoint(ckpt)  # raises on a torn file
        cmd = [*base, f"resume={run}", "train.iterations=100000", *common]
    assert latest_checkpoint(run).exists()
