"""The batched env and the Crazyflie tasks: interface, physics conventions, randomization, rendering."""

import numpy as np
import pytest
import torch

from sim.env import BatchedEnv, EnvConfig
from sim.observation_layout import quat_xyzw_to_rotmat, to_body
from sim.tasks import make_task


def make(n=64, **kw):
    task_kw = kw.pop("task_kw", {})
    return BatchedEnv(make_task(kw.pop("task", "crazyflie_hover"), **task_kw), EnvConfig(num_worlds=n, nthread=1, **kw))


def test_vecenv_interface_and_groups():
    env = make(32)
    obs = env.get_observations()
    assert set(obs.keys()) == {"policy", "critic"}
    assert obs["policy"].shape == (32, 25) and obs["policy"].dtype == torch.float32
    assert obs["critic"].shape[1] > obs["policy"].shape[1]  # privileged: DR parameters
    assert env.num_actions == 4 and env.max_episode_length == 800
    obs, rew, dones, extras = env.step(torch.zeros(32, 4))
    assert rew.shape == (32,) and dones.dtype == torch.bool
    assert extras["time_outs"].dtype == torch.bool


def test_time_outs_are_separate_from_terminations():
    env = make(16, task_kw={"start_half_extent": 0.0, "ground_start_prob": 0.0}, randomization="none", pushes=False)
    env.episode_length_buf[:] = env.max_episode_length - 1
    _, _, dones, extras = env.step(torch.zeros(16, 4))
    assert dones.all() and extras["time_outs"].all()
    # a flip is a termination, not a time-out: values must not bootstrap through it
    env.backend.qpos[:, 3:7] = torch.tensor([0.0, 1.0, 0.0, 0.0], dtype=torch.float64)  # upside down
    _, _, dones, extras = env.step(torch.zeros(16, 4))
    assert dones.all() and not extras["time_outs"].any()
    assert torch.all(extras["final"]["crash"] == 1)


def test_reward_terms_are_named_and_logged():
    env = make(64)
    env.stagger_episodes()
    seen = {}
    for _ in range(200):
        _, _, _, extras = env.step(torch.zeros(64, 4))
        seen.update(extras["episode"])
    for term in ("position", "near", "precision", "velocity", "angular_velocity", "action_rate", "tilt", "crash"):
        assert f"rew_{term}" in seen
    assert "metric_success" in seen and "metric_crash" in seen


def test_nan_actions_are_refused():
    env = make(4)
    with pytest.raises(ValueError, match="NaN"):
        env.step(torch.full((4, 4), float("nan")))


def test_ground_starts_and_start_distribution():
    env = make(2048, randomization="none")
    b = env.backend
    on_ground = b.qpos[:, 2] < 0.02
    assert on_ground.double().mean() >= 0.2
    err = (b.qpos[:, 0:3] - torch.tensor([0.0, 0.0, 1.0], dtype=torch.float64)).abs()
    assert err[:, 0:2].max() <= 1.0 and err[~on_ground].max() <= 1.0
    rzz = 1 - 2 * (b.qpos[:, 4] ** 2 + b.qpos[:, 5] ** 2)
    assert torch.rad2deg(torch.acos(rzz.clamp(-1, 1))).max() <= 30.0 + 1e-6
    assert b.qvel[:, 0:3].norm(dim=1).max() <= 1.0 + 1e-9


def test_domain_randomization_is_per_world():
    env = make(256, randomization="max")
    mass = env.backend.batch.expanded("body_mass")[:, 1]
    tau = env.backend.batch.expanded("actuator_dynprm")[:, :, 0]
    gear = env.backend.batch.expanded("actuator_gear")[:, :, 5]
    assert mass.std() > 0 and 0.027 * 0.9 - 1e-9 <= mass.min() and mass.max() <= 0.027 * 1.25 + 1e-9
    assert tau.min() >= 0.03 and tau.max() <= 0.15
    assert np.abs(gear).min() >= 0.005 and np.abs(gear).max() <= 0.008  # never the 0.025 of some simulators
    assert env.task.firmware.kf_scale.std() > 0 and env.task.latency.max() > 0


def _pd_rpyt(env):
    raw = env.task.raw_state(noisy=False)
    rot = quat_xyzw_to_rotmat(raw["quaternion"])
    e = to_body(raw["goal"] - raw["position"], rot)
    v = to_body(raw["velocity"], rot)
    pitch = (12 * e[:, 0] - 8 * v[:, 0]).clamp(-25, 25)  # positive pitch: nose down, accelerate forward
    roll = -(12 * e[:, 1] - 8 * v[:, 1]).clamp(-25, 25)  # positive roll: right side down, accelerate to -y
    thrust = 39000 + 20000 * e[:, 2] - 9000 * v[:, 2]
    cmd = torch.stack([roll, pitch, torch.zeros_like(roll), thrust], 1)
    return ((cmd - env.task.act_offset) / env.task.act_scale).clamp(-1, 1)


def test_rpyt_conventions_with_a_hand_written_controller():
    """A PD position controller written in send_setpoint conventions flies every nominal start home."""
    env = make(128, randomization="none", obs_noise=False, action_latency=False, pushes=False)
    for _ in range(600):
        env.step(_pd_rpyt(env))
    err = (env.backend.qpos[:, 0:3] - env.task.goal_pos).norm(dim=1)
    assert err.max() < 0.1, err.max()


def test_yaw_rate_sign():
    env = make(1, randomization="none", obs_noise=False, action_latency=False, pushes=False,
               task_kw={"start_half_extent": 0.0, "ground_start_prob": 0.0, "max_start_tilt_deg": 0.0,
                        "max_start_speed": 0.0})  # fmt: skip
    a = _pd_rpyt(env)
    a[:, 2] = 0.25  # +50 deg/s yaw rate command
    for _ in range(100):
        a = _pd_rpyt(env)
        a[:, 2] = 0.25
        env.step(a)
    assert env.backend.qvel[0, 5] == pytest.approx(np.deg2rad(50), rel=0.1)  # counter-clockwise from above


@pytest.mark.parametrize("mode", ["ctbr", "motors"])
def test_other_action_modes_run(mode):
    env = make(32, task_kw={"action_mode": mode})
    for _ in range(50):
        _, rew, _, _ = env.step(torch.zeros(32, 4))
    assert torch.isfinite(rew).all()


def test_goto_task_moves_goals():
    env = make(32, task="crazyflie_goto")
    g0 = env.task.goal_pos.clone()
    for _ in range(401):
        env.step(torch.zeros(32, 4))
    assert not torch.equal(g0, env.task.goal_pos)


def test_render_rgb_depth_segmentation():
    env = make(2)
    rgb = env.backend.render(1, camera="chase", width=64, height=48)
    depth = env.backend.render(1, camera="chase", width=64, height=48, kind="depth")
    seg = env.backend.render(1, camera="chase", width=64, height=48, kind="segmentation")
    assert rgb.shape == (48, 64, 3) and rgb.dtype == np.uint8 and rgb.std() > 0
    assert depth.shape == (48, 64) and np.isfinite(depth).all() and depth.max() > 0
    assert seg.shape == (48, 64) and len(np.unique(seg)) >= 2


def test_gymnasium_registration_single_world():
    import gymnasium as gym

    import robot_rl.gym_envs  # noqa: F401

    env = gym.make("robot_rl/CrazyflieHover-v0")
    obs, _ = env.reset(seed=0)
    assert obs.shape == env.observation_space.shape == (25,)
    total = 0.0
    for _ in range(20):
        obs, r, terminated, truncated, _ = env.step(env.action_space.sample() * 0)
        total += r
    assert np.isfinite(total) and obs.dtype == np.float32
    env.close()


@pytest.mark.parametrize("task", ["crazyflie_hover", "crazyflie_goto"])
def test_64_worlds_2000_steps_max_randomization_without_nan(task):
    env = make(64, task=task, randomization="max")
    g = torch.Generator().manual_seed(0)
    for _ in range(2000):
        obs, rew, _, _ = env.step(torch.rand(64, 4, generator=g) * 2 - 1)
        assert torch.isfinite(rew).all()
    assert torch.isfinite(obs["policy"]).all() and torch.isfinite(env.backend.qpos).all()
