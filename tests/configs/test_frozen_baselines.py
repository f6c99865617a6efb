"""The frozen arm baselines in configs/baselines/ still match the code's defaults: a change to the
dense reward weights or PPO hyper-parameters must be a deliberate new baseline, not a silent drift."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import yaml

from sim.tasks.arm import PickPlaceRewards, PushRewards

ROOT = Path(__file__).parents[2]


@pytest.mark.parametrize("task, rewards", [("arm_push", PushRewards), ("arm_pick_place", PickPlaceRewards)])
def test_frozen_baseline_matches_the_defaults(task, rewards):
    frozen = yaml.safe_load((ROOT / "configs" / "baselines" / f"{task}.yaml").read_text())
    assert frozen["task"] == task and frozen["tuning_budget"]
    assert frozen["dense_reward_weights"] == dataclasses.asdict(rewards())
    ppo = yaml.safe_load((ROOT / "configs" / "algo" / "ppo.yaml").read_text())
    ppo.pop("defaults")  # the YAML's schema (robot_rl.training.ppo_config.PPOConfig), not a hyper-parameter
    assert frozen["ppo"] == ppo
