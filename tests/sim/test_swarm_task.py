"""Crazyflie team in clutter (issue 8): scenes, the batched env, neighbour broadcasts, planner and controller."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from sim.env import BatchedEnv, EnvConfig
from sim.robots.goto_planner import CbfParams, MinJerkGoto, cbf_filter
from sim.scenes.clutter import ClutterConfig, Layout, obstacle_distance, sample_layouts
from sim.tasks.crazyflie import CrazyflieSwarm

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def env():
    task = CrazyflieSwarm(neighbour_rate_hz=10.0, neighbour_latency_s=0.03)
    e = BatchedEnv(task, EnvConfig(num_worlds=4, nthread=1, episode_length_s=20.0))
    yield e
    e.close()


def test_env_shapes_and_action_layout(env):
    task = env.task
    assert env.num_actions == 24 and task.num_drones == 6
    obs = env.get_observations()
    assert obs["policy"].shape == (4, 6 * 62)  # LEARN's 62 per drone: self 18, neighbours 12, ToF 32
    assert task.backend.model.nu == 24
    a = torch.zeros(4, 24)
    a[:, 4:8] = 1.0  # drone 1 full throttle, everyone else half
    env.step(a)
    ctrl = task.backend.ctrl.reshape(4, 6, 4)
    assert torch.all(ctrl[:, 1] > ctrl[:, 0])
    obs, rew, done, extras = env.step(torch.zeros(4, 24))
    assert torch.isfinite(obs["policy"]).all() and torch.isfinite(rew).all()
    terms = task.reward_terms()
    assert {"obstacle_collision", "neighbour_collision", "obstacle_proximity", "effort", "setpoint"} <= set(terms)


def test_scene_gaps_and_free_start_strips():
    cfg = ClutterConfig(density=0.35)
    lay = sample_layouts(cfg, 20, np.random.default_rng(3))
    cols = lay.columns[lay.columns[..., 2] > 0]
    assert len(cols) > 100
    for w in range(20):
        c = lay.columns[w][lay.columns[w, :, 2] > 0, :2]
        d = torch.cdist(c, c) + torch.eye(len(c)) * 10
        assert d.min() - cfg.column_diameter >= 0.2 - 1e-9  # gaps down to 0.2 m, never less
        # columns are at least 0.2 m from every wall they are not part of
        one = Layout(lay.columns[w : w + 1], lay.walls[w : w + 1])
        dist, _ = obstacle_distance(one, c[None], cfg.wall_thickness, cfg.column_diameter / 2)
        assert (dist[0][:, cfg.max_columns :] >= 0.2 - 1e-6).all()
    band = cfg.room[1] / 2 - cfg.start_margin
    assert cols[:, 1].abs().max() < band


def test_scenes_are_numbered_and_held_out():
    a = CrazyflieSwarm(scene_set="test", num_drones=2)
    b = CrazyflieSwarm(scene_set="test", num_drones=2)
    for t in (a, b):
        BatchedEnv(t, EnvConfig(num_worlds=3, nthread=1, seed=int(t is b)))
    torch.testing.assert_close(a.layout.columns, b.layout.columns)  # same held-out scenes whatever the seed
    torch.testing.assert_close(a.goal, b.goal)


def test_neighbour_broadcasts_are_delayed_and_held(env):
    task = env.task
    env.reset()
    seen = []
    for _ in range(25):
        env.step(torch.zeros(4, 24))
        seen.append(task.received.clone())
    changes = [i for i in range(1, 25) if not torch.equal(seen[i], seen[i - 1])]
    assert changes and all((b - a) % 10 == 0 for a, b in zip(changes, changes[1:], strict=False))  # 10 Hz
    # what arrives is 3 steps (30 ms) old
    i = changes[-1]
    assert not torch.allclose(seen[i][..., 0:3], task.history[0][..., 0:3])


def test_min_jerk_setpoints():
    start = torch.zeros(1, 1, 3, dtype=torch.float64)
    goal = torch.tensor([[[3.0, 4.0, 0.0]]], dtype=torch.float64)
    plan = MinJerkGoto.plan(start, goal, torch.tensor([[0.5]], dtype=torch.float64))
    assert plan.duration.item() == pytest.approx(10.0)
    p0, v0, a0 = plan.setpoint(torch.tensor([0.0], dtype=torch.float64))
    p1, v1, a1 = plan.setpoint(torch.tensor([10.0], dtype=torch.float64))
    pm, vm, _ = plan.setpoint(torch.tensor([5.0], dtype=torch.float64))
    torch.testing.assert_close(p0, start)
    torch.testing.assert_close(p1, goal)
    assert v0.abs().max() == 0 and v1.abs().max() < 1e-12 and a0.abs().max() == 0 and a1.abs().max() < 1e-12
    assert vm.norm().item() == pytest.approx(0.5 * 15 / 8)  # min-jerk peak speed = 1.875 x mean


def test_cbf_filter_keeps_distance_constraint():
    u_nom = torch.tensor([[[3.0, 0.0]]], dtype=torch.float64)  # pushing toward an obstacle on +x
    dist = torch.tensor([[[0.1]]], dtype=torch.float64)
    normal = torch.tensor([[[[-1.0, 0.0]]]], dtype=torch.float64)  # from the obstacle to the drone
    vel = torch.tensor([[[[0.5, 0.0]]]], dtype=torch.float64)
    p = CbfParams()
    u = cbf_filter(u_nom, dist, normal, vel, p, 6.0)
    bound = -p.k1 * (-0.5) - p.k0 * 0.1  # n.u >= -k1 n.v - k0 h
    assert (normal[0, 0, 0] * u[0, 0]).sum() >= bound - 1e-3
    assert u[0, 0, 1].abs() < 1e-9


def test_goto_baseline_hovers_and_flies_to_goal():
    from robot_rl.baselines.swarm_planners import GotoPlanner, make_task_env
    from sim.env import step_control_period

    task = make_task_env(2, seed=0, density=0.0, num_drones=3)
    ctl = GotoPlanner()
    for _ in range(200):
        step_control_period(task, task.motor_controls(ctl(task)))
    err = (task.pos - task.sp_pos).norm(dim=-1)
    assert err.max() < 0.1, err
    assert not task.crashed.any() and math.isfinite(float(task.pos.sum()))


def test_hydra_task_config_builds_the_env():
    from robot_rl.config import load_config
    from robot_rl.envs import make_env

    env = make_env(load_config(["task=crazyflie_swarm"]), num_worlds=2, nthread=1)
    assert env.num_actions == 24 and env.max_episode_length == 2000
    env.close()


def test_gap_scenario_puts_a_0p2_m_gap_on_every_planner_path():
    task = CrazyflieSwarm(scenario="gap", num_drones=6, gap_width=0.2)
    env = BatchedEnv(task, EnvConfig(num_worlds=3, nthread=1))
    start, goal = task.planner.start, task.planner.goal
    torch.testing.assert_close(start[..., 0], goal[..., 0])  # straight paths along y ...
    assert (start[..., 1] * goal[..., 1] < 0).all()  # ... across the wall line y = 0
    # along the wall line, the free space is exactly one 0.2 m opening around each drone's path
    xs = torch.linspace(-4.0, 4.0, 16001, dtype=torch.float64)  # 0.5 mm steps
    pts = torch.stack([xs, torch.zeros_like(xs)], -1)
    for w in range(3):
        one = Layout(task.layout.columns[w : w + 1], task.layout.walls[w : w + 1])
        dist, _ = obstacle_distance(one, pts[None], task.scene.wall_thickness, task.scene.column_diameter / 2)
        free = (dist[0].min(-1).values > 0).int()
        edges = torch.diff(free).nonzero().flatten()
        opens, closes = xs[edges[0::2] + 1], xs[edges[1::2]]
        assert len(opens) == len(closes) == 6
        widths = closes - opens
        assert torch.allclose(widths, torch.full_like(widths, 0.2), atol=1e-3), widths
        centres = ((opens + closes) / 2).sort().values
        torch.testing.assert_close(centres, start[w, :, 0].sort().values, atol=1e-3, rtol=0)
    # MuJoCo's geometry agrees: from each gap's centre, rays along the wall hit its two edges 0.1 m away
    p = torch.stack([start[..., 0], torch.zeros_like(start[..., 0]), start[..., 2]], -1)  # (3, 6, 3)
    pnt = torch.cat([p, p], 1).numpy().copy()
    vec = np.concatenate([np.tile([1.0, 0, 0], (3, 6, 1)), np.tile([-1.0, 0, 0], (3, 6, 1))], 1)
    dist, _ = task.backend.batch.ray(pnt, vec, bodyexclude=np.full((3, 12), -1), ids=np.arange(3, dtype=np.int64))
    np.testing.assert_allclose(dist, 0.1, atol=1e-6)
    env.close()


def test_gap_fraction_mixes_gap_walls_into_training_scenes_only():
    with pytest.raises(ValueError, match="gap_fraction"):
        CrazyflieSwarm(gap_fraction=1.5)
    plain = CrazyflieSwarm()
    mixed = CrazyflieSwarm(gap_fraction=0.5)
    envs = [BatchedEnv(t, EnvConfig(num_worlds=16, nthread=1, seed=3)) for t in (plain, mixed)]
    straight = (mixed.planner.start[..., 0] == mixed.planner.goal[..., 0]).all(dim=1)  # gap lanes fly along y
    assert 3 <= int(straight.sum()) <= 13  # about half of 16 resets
    assert not bool((plain.planner.start[..., 0] == plain.planner.goal[..., 0]).all(dim=1).any())
    same = ~straight  # the clutter worlds are the scenes they would have been without the mix
    torch.testing.assert_close(mixed.planner.start[same], plain.planner.start[same])
    torch.testing.assert_close(mixed.layout.columns[same], plain.layout.columns[same])
    held_out = CrazyflieSwarm(gap_fraction=1.0, scene_set="test")  # evaluation scenes keep their scenario
    env = BatchedEnv(held_out, EnvConfig(num_worlds=4, nthread=1))
    assert not bool((held_out.planner.start[..., 0] == held_out.planner.goal[..., 0]).all(dim=1).any())
    for e in [*envs, env]:
        e.close()


def test_safety_guide_penalises_deviation_from_the_safe_command():
    task = CrazyflieSwarm(num_drones=2, rewards={"safety_guide": 0.5})
    env = BatchedEnv(task, EnvConfig(num_worlds=2, nthread=1))
    env.step(torch.ones(2, 8))  # full throttle: far from the CBF-filtered hover-and-go command
    far = task.reward_terms()["safety_guide"]
    safe = 2.0 * task.safe_command() - 1.0
    env.step(safe.reshape(2, 8).float())
    near = task.reward_terms()["safety_guide"]
    assert (far < -0.25).all() and (near > far).all() and (near <= 0).all()
    with pytest.raises(ValueError, match="strength"):
        CrazyflieSwarm(rewards={"safety_guide": -0.1})
    env.close()


def test_goal_progress_is_each_drones_speed_toward_its_goal():
    task = CrazyflieSwarm(num_drones=2, rewards={"goal_progress": 2.0})
    env = BatchedEnv(task, EnvConfig(num_worlds=1, nthread=1))
    env.step(torch.zeros(1, 8))
    to_goal = task.goal - task.pos
    unit = to_goal / to_goal.norm(dim=-1, keepdim=True)
    b = task.backend
    b.qvel[:, task.vidx[0, 0:3]] = 0.5 * unit[0, 0]  # drone 0 flies toward its goal at 0.5 m/s
    b.qvel[:, task.vidx[1, 0:3]] = -0.2 * unit[0, 1]  # drone 1 away from its goal at 0.2 m/s
    term = task.reward_terms()["goal_progress"]
    torch.testing.assert_close(term, torch.tensor([2.0 * (0.5 - 0.2) / 2], dtype=torch.float64))  # team mean
    env.close()


def test_sensed_safe_command_reacts_only_to_what_the_policy_senses():
    from robot_rl.baselines.swarm_planners import GotoPlanner

    task = CrazyflieSwarm(num_drones=2)
    env = BatchedEnv(task, EnvConfig(num_worlds=2, nthread=1))
    env.step(torch.zeros(2, 8))
    # no beam sees anything, the broadcasts are far away: no barrier is active, the plain go-to command
    task.tof[:] = task.sensors.cfg.clip
    task.received[..., 0:3] += 100.0
    torch.testing.assert_close(task.sensed_safe_command(), GotoPlanner()(task))
    # a beam reads an obstacle inside the safety distance: the command steers away from it
    task.tof[:, 0, 0] = 0.0
    moved = (task.sensed_safe_command() - GotoPlanner()(task)).abs().amax(dim=-1)
    assert (moved[:, 0] > 1e-3).all() and torch.equal(moved[:, 1], torch.zeros(2, dtype=moved.dtype))
    env.close()
