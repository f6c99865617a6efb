"""Swarm policies and classical baselines (issue 8)."""

from __future__ import annotations

import math

import pytest
import torch

from robot_rl.baselines.swarm_planners import METRIC_COLUMNS, PLANNERS, evaluate, format_table
from robot_rl.policies.swarm_attention import SwarmAttentionPolicy, SwarmMlpPolicy, parameter_count

torch.set_num_threads(1)


def test_attention_policy_has_learns_size_and_shares_weights_across_drones():
    pol = SwarmAttentionPolicy(num_drones=6, k_neighbours=2, num_beams=32)
    assert parameter_count(pol) == 2948  # LEARN's on-board network
    assert 2500 < parameter_count(SwarmMlpPolicy()) < 3500
    obs = torch.randn(5, 6 * 62)
    out = pol(obs)
    assert out.shape == (5, 24)
    perm = torch.tensor([3, 1, 0, 5, 2, 4])
    permuted = pol(obs.reshape(5, 6, 62)[:, perm].reshape(5, -1))
    torch.testing.assert_close(permuted.reshape(5, 6, 4), out.reshape(5, 6, 4)[:, perm])


def test_policy_drives_the_swarm_env():
    from sim.env import BatchedEnv, EnvConfig
    from sim.tasks.crazyflie import CrazyflieSwarm

    task = CrazyflieSwarm(num_drones=3)
    env = BatchedEnv(task, EnvConfig(num_worlds=2, nthread=1))
    pol = SwarmAttentionPolicy(num_drones=3)
    obs = env.get_observations()
    with torch.no_grad():
        for _ in range(5):
            obs, rew, _, _ = env.step(pol(obs["policy"]).clamp(-1, 1))
    assert torch.isfinite(rew).all()
    env.close()


def test_baselines_report_every_metric():
    rows = {name: evaluate(P(), num_scenes=2, episode_s=2.0, num_drones=3) for name, P in PLANNERS.items()}
    for r in rows.values():
        assert set(METRIC_COLUMNS) <= set(r)
        assert 0.0 <= r["success"] <= 1.0
        assert r["success"] == 0.0 and math.isnan(r["time_to_goal_s"])  # 2 s is too short to arrive
        assert r["mean_speed"] > 0.05
        per_scene = r["per_scene"]  # drones per scene: 2 scenes of 3 drones
        assert len(per_scene["collision"]) == 2 and sum(per_scene["collision"]) / 6 == pytest.approx(r["collision"])
        assert per_scene["success"] == [0, 0]
    assert "apf" in format_table(rows)


def test_tuning_sweep_writes_a_config_that_tuned_planners_reads(tmp_path):
    from robot_rl.baselines.swarm_planners import SWEEP, TUNED_PATH, tune, tuned_planners

    out = tmp_path / "tuned.yaml"
    body = tune(1, 0.2, 0, out, "test command", num_drones=2)
    text = out.read_text()
    assert text.startswith("# Classical planners") and "test command" in text and "&id" not in text
    planners = tuned_planners(out)
    assert set(planners) == {"goto", "apf", "cbf"}
    assert planners["cbf"].cbf.safe_distance == body["cbf"]["params"]["safe_distance"]
    assert planners["apf"].k_obstacle == body["apf"]["params"]["k_obstacle"]
    assert len(body["apf"]["sweep"]) == 9 and len(body["cbf"]["sweep"]) == 9
    # the committed choice is one of the swept settings
    committed = tuned_planners(TUNED_PATH)
    assert committed["apf"].k_obstacle in SWEEP["apf"]["k_obstacle"]
    assert committed["cbf"].cbf.k0 in SWEEP["cbf"]["k"]
