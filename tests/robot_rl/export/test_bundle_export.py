"""The exported ONNX policy is the torch policy; the deploy runtime rebuilds its observations."""

import numpy as np
import pytest
import torch
import yaml

from robot_rl.deploy import BundleError, PolicyRuntime, load_bundle


def _actor(run):
    from omegaconf import OmegaConf

    from robot_rl.commands.common import load_actor

    actor, env = load_actor(OmegaConf.load(run / "config.yaml"), run)
    return actor, env


def test_onnx_matches_torch_on_recorded_and_out_of_range_observations(tiny_run, hover_bundle):
    from omegaconf import OmegaConf

    from robot_rl.envs import make_env
    from robot_rl.evaluation.evaluate import evaluate, torch_policy

    actor, _ = _actor(tiny_run)
    cfg = OmegaConf.load(tiny_run / "config.yaml")
    env = make_env(cfg, num_worlds=16, seed=5)
    env.max_episode_length = 100
    recorded = evaluate(env, torch_policy(actor), progress=False, record_obs=16)["recorded_obs"]
    # raw states far outside the ranges seen in training, through the layout: every clip is hit
    runtime = PolicyRuntime(hover_bundle)
    rng = np.random.default_rng(0)
    wild_raw = {
        "position": rng.normal(size=(256, 3)) * 50,
        "velocity": rng.normal(size=(256, 3)) * 50,
        "quaternion": rng.normal(size=(256, 4)),
        "angular_velocity": rng.normal(size=(256, 3)) * 500,
        "goal": rng.normal(size=(256, 3)) * 50,
        "last_action": rng.normal(size=(256, 4)) * 50,
        "goal_error_integral": rng.normal(size=(256, 3)) * 50,
    }
    wild = runtime.observation(wild_raw)
    clips = np.concatenate([[t.clip] * t.dim for t in runtime.bundle.observation])
    assert np.mean(np.abs(wild) == clips) > 0.5  # most entries sit on their clip
    obs = np.concatenate([recorded, wild])
    with torch.inference_mode():
        expected = actor.mlp(actor.obs_normalizer(torch.from_numpy(obs))).numpy()
    got = runtime.policy(obs)
    assert np.max(np.abs(got - expected)) < 1e-5
    assert len(obs) > 1000


def test_deploy_observation_matches_simulator(tiny_run, hover_bundle):
    """The numpy layout in policy.yaml rebuilds exactly what the simulator fed the policy."""
    from omegaconf import OmegaConf

    from robot_rl.envs import make_env

    cfg = OmegaConf.load(tiny_run / "config.yaml")
    env = make_env(cfg, num_worlds=32, seed=3)
    runtime = PolicyRuntime(hover_bundle)
    g = torch.Generator().manual_seed(0)
    for _ in range(50):
        env.step(torch.rand(32, 4, generator=g) * 2 - 1)
        raw = {k: v.numpy() for k, v in env.task.last_raw.items()}
        sim_obs = env.get_observations()["policy"].numpy()
        assert np.allclose(runtime.observation(raw), sim_obs, atol=1e-5)


def test_runtime_integrator_matches_simulator(tiny_run, hover_bundle):
    """The runtime keeps the integral term itself on a robot; it must equal the simulator's."""
    from omegaconf import OmegaConf

    from robot_rl.envs import make_env

    cfg = OmegaConf.load(tiny_run / "config.yaml")
    env = make_env(cfg, num_worlds=1, seed=4, pushes=False)
    runtime = PolicyRuntime(hover_bundle)
    runtime.reset()
    a = torch.zeros(1, 4)
    for _ in range(300):
        raw = {k: v[0].numpy() for k, v in env.task.last_raw.items() if k != "goal_error_integral"}
        runtime.act(raw)
        assert np.allclose(runtime.integrals["goal_error_integral"], env.task.err_int[0].numpy(), atol=1e-9)
        _, _, dones, _ = env.step(a)
        if bool(dones[0]):
            runtime.reset()


def test_bundle_yaml_describes_the_policy(hover_bundle):
    doc = yaml.safe_load((hover_bundle / "policy.yaml").read_text())
    assert doc["schema_version"] == 2
    assert len(doc["integrity"]["sha256"]) == 64  # over policy.onnx and the rest of this file
    assert doc["action"]["mode"] == "rpyt"
    assert doc["control_rate_hz"] == 100.0
    assert doc["action"]["names"] == ["roll_deg", "pitch_deg", "yaw_rate_deg_s", "thrust_pwm"]
    assert len(doc["onnx"]["sha256"]) == 64
    assert doc["source"]["run"] == "tiny" and "torch" in doc["source"]["versions"]
    assert len(doc["normalizer"]["mean"]) == doc["observation"]["size"]


def test_tampered_onnx_is_refused(tmp_path, hover_bundle):
    import shutil

    b = tmp_path / "b"
    shutil.copytree(hover_bundle, b)
    with open(b / "policy.onnx", "ab") as f:
        f.write(b"\0")
    with pytest.raises(BundleError, match="sha256"):
        load_bundle(b)


def test_runtime_rejects_nan_state(hover_bundle):
    runtime = PolicyRuntime(hover_bundle)
    raw = {
        "position": np.array([0.0, 0.0, np.nan]),
        "velocity": np.zeros(3),
        "quaternion": np.array([0.0, 0.0, 0.0, 1.0]),
        "angular_velocity": np.zeros(3),
        "goal": np.array([0.0, 0.0, 1.0]),
    }
    with pytest.raises(ValueError, match="position"):
        runtime.act(raw)
