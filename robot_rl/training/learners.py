"""Which trainer an algo section builds: PPO (rsl_rl) or our off-policy TD3 / SAC, chosen by algo["name"]."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from robot_rl.config import ConfigError

if TYPE_CHECKING:
    from robot_rl.training.distributed import Ranks

OFF_POLICY = ("td3", "sac")


def needs_final_observation(algo_name: str) -> bool:
    """Off-policy learners bootstrap time-outs from the ended episodes' observations (EnvConfig.final_observation)."""
    return str(algo_name) in OFF_POLICY


def check_algo(algo: dict) -> None:
    """Refuse a bad off-policy algo section before a run directory is made (PPO's keys: the schema's rules)."""
    if str(algo.get("name")) in OFF_POLICY:
        from robot_rl.training.off_policy.config import OffPolicyConfig

        try:
            OffPolicyConfig.from_dict(algo)
        except ValueError as e:
            raise ConfigError(str(e)) from None


def make_trainer(
    env,
    algo: dict,
    run_dir: Path | None = None,
    writer=None,
    config_hash: str | None = None,
    ranks: Ranks | None = None,
):
    """A PPOTrainer or OffPolicyTrainer for this algo section; a bad off-policy key or value is a ConfigError.
    ranks: a torchrun run's (robot_rl.training.distributed)."""
    if str(algo.get("name")) in OFF_POLICY:
        from robot_rl.training.off_policy.trainer import OffPolicyTrainer

        try:
            return OffPolicyTrainer(env, algo, run_dir=run_dir, writer=writer, config_hash=config_hash, ranks=ranks)
        except ValueError as e:
            raise ConfigError(str(e)) from None
    from robot_rl.training.ppo_trainer import PPOTrainer

    return PPOTrainer(env, algo, run_dir=run_dir, writer=writer, config_hash=config_hash, ranks=ranks)
