"""Go1-like quadruped: the model as written, standing on its servos, the velocity task under randomization,
the rough-terrain curriculum, and a train -> export round trip."""

from __future__ import annotations

import math

import mujoco
import numpy as np
import pytest
import torch

from sim.backends import load_model
from sim.env import BatchedEnv, EnvConfig
from sim.tasks import make_task
from sim.tasks.quadruped.constants import (
    CALF_LENGTH,
    DEFAULT_JOINT_POS,
    FLAT_SCENE,
    FOOT_RADIUS,
    JOINT_NAMES,
    LEGS,
    SPAWN_HEIGHT,
    THIGH_LENGTH,
    TOTAL_MASS,
    TRUNK_MASS,
)
from sim.tasks.quadruped.terrain import TERRAIN_BORDER

TERMS = {"tracking_lin_vel", "tracking_ang_vel", "lin_vel_z", "ang_vel_xy", "orientation", "torques", "joint_acc",
         "action_rate", "feet_air_time", "collision", "joint_limits", "fall"}  # fmt: skip


def make_env(n: int = 8, randomization: str = "none", seconds: float = 20.0, **params) -> BatchedEnv:
    cfg = EnvConfig(num_worlds=n, seed=0, nthread=1, randomization=randomization, episode_length_s=seconds,
                    obs_noise=randomization != "none", pushes=randomization != "none")  # fmt: skip
    return BatchedEnv(make_task("quadruped_velocity", **params), cfg)


@pytest.fixture(scope="module")
def model() -> mujoco.MjModel:
    return load_model(FLAT_SCENE)


def home_height(model: mujoco.MjModel) -> float:
    """Trunk height of the home pose with the lowest foot touching the ground (kinematics only)."""
    data = mujoco.MjData(model)
    mujoco.mj_resetDataKeyframe(model, data, model.key("home").id)
    mujoco.mj_kinematics(model, data)
    lowest = min(data.geom(f"{leg}_foot").xpos[2] for leg in LEGS) - FOOT_RADIUS
    return float(data.qpos[2] - lowest)


def test_mass_dimensions_limits_and_rates_are_as_written(model):
    assert sum(model.body_mass) == pytest.approx(TOTAL_MASS, abs=1e-9)
    assert 11.5 < TOTAL_MASS < 13.5  # Unitree: "about 12 kg"
    assert model.body("trunk").mass[0] == pytest.approx(TRUNK_MASS, abs=1e-9)
    assert TRUNK_MASS == pytest.approx(5.204)
    assert np.allclose(model.geom("trunk").size, [0.3762 / 2, 0.0935 / 2, 0.114 / 2])
    for leg in LEGS:
        sx, sy = (1 if leg[0] == "F" else -1), (1 if leg[1] == "L" else -1)
        assert np.allclose(model.body(f"{leg}_hip").pos, [sx * 0.1881, sy * 0.04675, 0])
        assert np.allclose(model.body(f"{leg}_thigh").pos, [0, sy * 0.08, 0])
        assert np.linalg.norm(model.body(f"{leg}_calf").pos) == pytest.approx(THIGH_LENGTH)
        assert np.linalg.norm(model.geom(f"{leg}_foot").pos) == pytest.approx(CALF_LENGTH)
        assert model.geom(f"{leg}_foot").size[0] == pytest.approx(FOOT_RADIUS)
    assert [model.joint(i + 1).name for i in range(12)] == JOINT_NAMES
    assert [model.actuator(i).name for i in range(12)] == JOINT_NAMES
    limits = {"hip": (-0.863, 0.863, 23.7), "thigh": (-0.686, 4.501, 23.7), "calf": (-2.818, -0.888, 35.55)}
    for name in JOINT_NAMES:
        lo, hi, tau = limits[name.split("_")[1]]
        assert np.allclose(model.joint(name).range, [lo, hi])
        assert np.allclose(model.actuator(name).forcerange, [-tau, tau])
        assert model.actuator(name).gainprm[0] == pytest.approx(30.0)  # kp, N m/rad
        assert model.actuator(name).biasprm[2] == pytest.approx(-0.75)  # kv, N m s/rad
    assert model.opt.timestep == pytest.approx(0.005)
    task = make_task("quadruped_velocity")
    assert task.control_dt == pytest.approx(task.substeps * model.opt.timestep)  # 50 Hz policy, 200 Hz physics
    assert np.allclose(model.key("home").qpos[7:], DEFAULT_JOINT_POS)
    assert np.allclose(model.key("home").ctrl, DEFAULT_JOINT_POS)


def test_stands_on_the_default_targets_for_two_seconds(model):
    nominal = home_height(model)
    assert 0.30 < nominal < 0.34
    env = make_env(n=4, randomization="none", command_resample_s=0.0)
    task = env.task
    heights, tilts = [], []
    for _ in range(int(2.0 / task.control_dt)):
        env.step(torch.zeros(4, 12))  # zero action: the servos hold the home pose
        heights.append(env.backend.qpos[:, 2].clone())
        tilts.append(torch.rad2deg(torch.acos(-task.gravity[:, 2].clamp(-1, 1))))
        assert not task.fell.any()
        assert (task.contacts[:, 4:13] == 0).all()  # trunk, hips, thighs clear of the ground
    z = torch.stack(heights)
    # kp 30 against ~32 N per leg sags the knees: measured ~3 cm below the kinematic height, no further
    assert (z - nominal).abs().max() < 0.05
    assert (z[-25:] - nominal).abs().max() < 0.04
    assert float(z[-25:].max() - z[-25:].min()) < 0.005  # settled, not bouncing
    assert torch.stack(tilts).max() < 5.0
    assert (task.contacts[:, :4] > 0).all()  # on all four feet
    assert (env.backend.qpos[:, 0:2] - task.spawn[:, 0:2]).norm(dim=1).max() < 0.05


def test_reward_terms_are_named_and_finite():
    env = make_env(n=8, randomization="train")
    gen = torch.Generator().manual_seed(0)
    for _ in range(50):
        env.step(torch.rand(8, 12, generator=gen) * 2 - 1)
        terms = env.task.reward_terms()
        assert set(terms) == TERMS
        assert all(v.shape == (8,) and torch.isfinite(v).all() for v in terms.values())
    obs = env.get_observations()
    assert obs["policy"].shape == (8, 48) and torch.isfinite(obs["policy"]).all()
    assert torch.isfinite(obs["critic"]).all()
    blind = make_env(n=2, observe_lin_vel=False)  # no velocity estimator on the robot: the critic still has it
    assert blind.get_observations()["policy"].shape == (2, 45)
    assert blind.get_observations()["critic"].shape == (2, 45 + 12)


def test_commands_cover_the_ranges_and_small_ones_stand_still():
    env = make_env(n=512, randomization="none", command_resample_s=0.0)
    cmd = env.task.command
    assert cmd[:, 0].min() >= -1.0 and cmd[:, 0].max() <= 1.0 and cmd[:, 0].max() > 0.9
    assert cmd[:, 1].abs().max() <= 0.5 and cmd[:, 2].abs().max() <= 1.0
    planar = cmd[:, :2].norm(dim=1)
    assert ((planar == 0) | (planar >= 0.2)).all() and (planar == 0).any()


@pytest.mark.slow
@pytest.mark.parametrize("terrain", ["flat", "rough"])
def test_32_worlds_1000_steps_under_max_randomization(terrain):
    torch.set_num_threads(1)
    env = make_env(n=32, randomization="max", terrain=terrain, max_init_level=9)
    gen = torch.Generator().manual_seed(0)
    done_count = 0
    for _ in range(1000):
        obs, reward, dones, extras = env.step(torch.rand(32, 12, generator=gen) * 2 - 1)
        assert torch.isfinite(reward).all()
        done_count += int(dones.sum())
        if "final" in extras:
            final = extras["final"]
            for key in ("success", "crash", "fall", "lin_vel_error", "yaw_rate_error", "position_error_m"):
                assert torch.isfinite(final[key]).all()
    assert torch.isfinite(obs["policy"]).all() and torch.isfinite(obs["critic"]).all()
    assert torch.isfinite(env.backend.qpos).all()
    assert done_count >= 32  # random actions fall over: episodes ended and reset along the way


def test_rough_terrain_resets_and_curriculum_levels():
    env = make_env(n=12, randomization="none", terrain="rough", max_init_level=3)
    task, b = env.task, env.backend
    tile = task.terrain_tile_m

    def check_spawns():
        x0 = TERRAIN_BORDER + task.level.double() * tile
        y0 = TERRAIN_BORDER + task.tile_type.double() * tile
        assert ((task.spawn[:, 0] > x0) & (task.spawn[:, 0] < x0 + tile)).all()
        assert ((task.spawn[:, 1] > y0) & (task.spawn[:, 1] < y0 + tile)).all()
        assert torch.allclose(b.qpos[:, 2] - task.spawn[:, 2], torch.full((12,), SPAWN_HEIGHT, dtype=torch.float64))

    check_spawns()
    assert task.level.max() <= 3
    for _ in range(10):
        env.step(torch.zeros(12, 12))
    ids = torch.arange(12)
    task.level[:] = 5
    # evaluation never calls on_iteration: levels hold still
    env.reset_worlds(ids)
    assert (task.level == 5).all()
    check_spawns()

    task.on_iteration(0)
    for _ in range(10):
        env.step(torch.zeros(12, 12))
    task.walked[:6] = 0.6 * tile  # walked past half a tile: up
    assert (task.walked[6:] < 0.5).all()
    task.cmd_distance[6:] = 10.0  # asked for 10 m, walked ~0: down
    task.level[0] = task.terrain_levels - 1  # past the top: a random level
    env.reset_worlds(ids)
    assert (task.level[1:6] == 6).all()
    assert (task.level[6:] == 4).all()
    assert 0 <= task.level[0] < task.terrain_levels
    check_spawns()
    for _ in range(25):  # the robots land on the generated terrain and stand there
        env.step(torch.zeros(12, 12))
    assert torch.isfinite(b.qpos).all()
    clearance = b.qpos[:, 2] - task.spawn[:, 2]
    assert ((clearance > 0.15) & (clearance < SPAWN_HEIGHT + 0.01)).all()
    outcome = task.episode_outcome(ids, torch.ones(12, dtype=torch.bool))
    assert torch.equal(outcome["terrain_level"], task.level.double())


def test_fall_terminates_and_scores():
    env = make_env(n=2, randomization="none")
    b = env.backend
    b.qpos[0, 2] = 0.06  # dropped onto its belly: thighs (and trunk) touch the ground
    b.forward()
    _, _, dones, extras = env.step(torch.zeros(2, 12))
    assert dones.tolist() == [True, False]
    assert extras["final"]["fall"].tolist() == [1.0] and extras["final"]["success"].tolist() == [0.0]


def test_same_seed_same_trajectory():
    hashes = []
    for _ in range(2):
        env = make_env(n=4, randomization="max", terrain="flat")
        gen = torch.Generator().manual_seed(3)
        for _ in range(30):
            env.step(torch.rand(4, 12, generator=gen) * 2 - 1)
        hashes.append(env.state_hash())
    assert hashes[0] == hashes[1]


@pytest.mark.slow  # ~8-12 s: a system test (train, export, deploy-runtime parity, eval)
def test_two_iteration_training_run_exports_a_bundle(tmp_path):
    from robot_rl import commands
    from robot_rl.deploy import PolicyRuntime, load_bundle

    (run,) = commands.cmd_train(["task=quadruped_velocity", "task.num_worlds=32", "train.iterations=2",
                                 f"runs_root={tmp_path}", "run_name=q", "train.progress=false"])  # fmt: skip
    assert (run / "checkpoints" / "model_2.pt").is_file()
    bundle_dir = commands.export_run(run)
    bundle = load_bundle(bundle_dir)
    assert bundle.task == "quadruped_velocity" and bundle.action.mode == "joint_position"
    assert bundle.obs_dim == 48 and bundle.action_dim == 12 and bundle.control_rate_hz == pytest.approx(50.0)
    assert bundle.extra["default_joint_position"] == DEFAULT_JOINT_POS
    assert bundle.extra["servo"]["kp"] == pytest.approx(30.0) and bundle.extra["servo"]["kd"] == pytest.approx(0.75)
    assert np.allclose(bundle.action.offset, DEFAULT_JOINT_POS)
    # the deploy runtime rebuilds the policy's observation from the raw state the task reports
    env = make_env(n=2, randomization="train")
    for _ in range(5):
        env.step(torch.zeros(2, 12))
    runtime = PolicyRuntime(bundle_dir)
    raw = {k: v.numpy() for k, v in env.task.last_raw.items()}
    assert np.allclose(runtime.observation(raw), env.get_observations()["policy"].numpy(), atol=1e-5)
    result = commands.evaluate_run(run, ["eval.episodes=4", "task.episode_length_s=2.0"])
    assert 0.0 <= result["metrics"]["success_rate"] <= 1.0 and math.isfinite(result["metrics"]["mean_return"])
    # the task's further outcomes reach the evaluation summary (tracking errors of the acceptance check)
    assert all(math.isfinite(result["metrics"][k]) for k in ("mean_lin_vel_error", "mean_yaw_rate_error", "mean_fall"))
    video = commands.play_run(run, ["play.seconds=1.0", "play.width=160", "play.height=128"])  # `robot-rl play`
    assert video.read_bytes()[4:8] == b"ftyp" and video.stat().st_size > 2000
