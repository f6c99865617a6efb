"""algo.anchor / anchor_coef: a fine-tune pulled toward another checkpoint's policy stays closer to it."""

import pytest
import torch
from omegaconf import OmegaConf

from robot_rl.config import ConfigError
from robot_rl.envs import make_env
from robot_rl.training.checkpoint import latest_checkpoint
from robot_rl.training.ppo_trainer import PPOTrainer


def _fine_tune(run, anchor_coef: float) -> tuple[PPOTrainer, object]:
    cfg = OmegaConf.load(run / "config.yaml")
    algo = OmegaConf.to_container(cfg.algo, resolve=True)
    start = latest_checkpoint(run)
    algo.update(anchor=str(start), anchor_coef=anchor_coef, learning_rate=1e-2, schedule="fixed")
    torch.manual_seed(0)
    env = make_env(cfg, num_worlds=32, seed=5)
    trainer = PPOTrainer(env, algo)
    trainer.load(start, fine_tune=True)
    trainer.learn(4, progress=False)
    return trainer, env


def test_anchor_keeps_the_fine_tune_near_the_anchor_policy(tiny_run):
    free, env = _fine_tune(tiny_run, 0.0)
    anchored, _ = _fine_tune(tiny_run, 50.0)
    assert free.anchor is None  # a zero coefficient loads no anchor
    obs = env.get_observations()
    with torch.no_grad():
        target = anchored.anchor(obs)  # the start checkpoint's policy, frozen
        drift_free = (free.alg.actor(obs) - target).pow(2).mean().item()
        drift_anchored = (anchored.alg.actor(obs) - target).pow(2).mean().item()
    print(f"\nmean squared action drift from the start policy: anchored {drift_anchored:.4f}, free {drift_free:.4f}")
    assert drift_free > 0.0
    assert drift_anchored < 0.5 * drift_free, (drift_anchored, drift_free)


def test_anchor_coef_without_an_anchor_is_a_config_error(tiny_run):
    cfg = OmegaConf.load(tiny_run / "config.yaml")
    algo = {**OmegaConf.to_container(cfg.algo, resolve=True), "anchor": None, "anchor_coef": 1.0}
    with pytest.raises(ConfigError, match="algo.anchor"):
        PPOTrainer(make_env(cfg, num_worlds=8, seed=0), algo)
