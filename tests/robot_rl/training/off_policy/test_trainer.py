"""OffPolicyTrainer on the real crazyflie_hover env: time-outs bootstrap from the final observation, checkpoints
restore the learner and its replay ring, and a resumed learner continues deterministically."""

import pytest
import torch
from omegaconf import OmegaConf

from robot_rl.config import load_config
from robot_rl.envs import make_env
from robot_rl.training.checkpoint import load_checkpoint
from robot_rl.training.off_policy.trainer import REPLAY_FILE, OffPolicyTrainer, next_observations

SMALL = {
    "steps_per_iteration": 4,
    "buffer_size": 512,
    "batch_size": 64,
    "learning_starts": 32,
    "actor_hidden_dims": [16, 16],
    "critic_hidden_dims": [16, 16],
}


def _trainer(name="td3", worlds=8, seed=0, run_dir=None, **over) -> OffPolicyTrainer:
    cfg = load_config([f"algo={name}", "task.episode_length_s=0.05"])  # 5-step episodes: many time-outs
    env = make_env(cfg, num_worlds=worlds, seed=seed, final_observation=True)
    algo = {**OmegaConf.to_container(cfg.algo, resolve=True), **SMALL, **over}
    return OffPolicyTrainer(env, algo, run_dir=run_dir)


def test_time_outs_store_the_final_observation_and_bootstrap_terminations_do_not():
    tr = _trainer(seed=3)
    obs = tr.env.get_observations()
    seen_time_out = False
    for _ in range(12):
        row = tr.buffer.ptr if tr.buffer is not None else 0
        obs, _, dones, extras = tr.collect_step(obs)
        d = tr.buffer.data
        if not dones.any():
            assert torch.equal(d["next_obs"][row], obs["policy"])
            continue
        ids = extras["final"]["ids"]
        final = extras["final_observation"]["policy"]
        assert torch.equal(d["next_obs"][row, ids], final)
        assert not torch.equal(final, obs["policy"][ids])  # the returned obs is already the next episode's
        keep = torch.ones(tr.env.num_envs, dtype=torch.bool)
        keep[ids] = False
        assert torch.equal(d["next_obs"][row, keep], obs["policy"][keep])
        time_outs = extras["time_outs"]
        assert torch.equal(d["terminated"][row], dones & ~time_outs)
        assert torch.equal(d["next_critic_obs"][row, ids], extras["final_observation"]["critic"])
        seen_time_out |= bool(time_outs.any())
    assert seen_time_out
    b = tr.buffer.sample(2048, n_step=3, gamma=0.99)
    assert (b["discount"] > 0).any()


def test_next_observations_needs_the_final_observation():
    cfg = load_config(["algo=td3", "task.episode_length_s=0.02"])
    env = make_env(cfg, num_worlds=2)  # built without final_observation
    obs, _, dones, extras = env.step(torch.zeros(2, env.num_actions))
    obs, _, dones, extras = env.step(torch.zeros(2, env.num_actions))
    assert dones.any()
    with pytest.raises(ValueError, match="final_observation"):
        next_observations(obs, dones, extras, ("policy",))
    with pytest.raises(ValueError, match="final_observation"):
        OffPolicyTrainer(env, OmegaConf.to_container(cfg.algo, resolve=True))


def _params(tr: OffPolicyTrainer) -> dict:
    return {k: v.clone() for k, v in tr.agent.state_dict().items()}


@pytest.mark.parametrize("name", ["td3", "sac"])
def test_checkpoint_restores_learner_and_replay_and_resumed_runs_agree(tmp_path, name):
    a = _trainer(name, run_dir=tmp_path)
    a.learn(3, save_every=3, progress=False)
    ckpt = tmp_path / "checkpoints" / "model_3.pt"
    saved = load_checkpoint(ckpt)
    assert saved["iteration"] == 3 and saved["total_steps"] == 3 * 4 * 8
    assert (tmp_path / "checkpoints" / REPLAY_FILE).is_file()
    resumed = []
    for _ in range(2):  # another env seed than a's: everything the learner needs must come from the files
        b = _trainer(name, seed=11)
        b.load(ckpt)
        for k, v in _params(a).items():
            assert torch.equal(b.agent.state_dict()[k], v), k
        b.learn(3, progress=False)  # no iterations left: only reads the replay ring back
        assert b.resume_note.endswith(f"{len(a.buffer):,} transitions restored")
        for k in a.buffer.data:
            assert torch.equal(b.buffer.data[k], a.buffer.data[k]), k
        assert b.agent.updates == a.agent.updates
        b.learn(5, progress=False)
        resumed.append(_params(b))
    for k in resumed[0]:  # two processes resuming the same checkpoint continue identically
        assert torch.equal(resumed[0][k], resumed[1][k]), k
    assert any(not torch.equal(resumed[0][k], v) for k, v in _params(a).items())  # it did learn on


def test_a_replay_file_of_another_iteration_is_a_warm_restart(tmp_path):
    a = _trainer(run_dir=tmp_path)
    a.learn(2, save_every=1, progress=False)
    b = _trainer()
    b.load(tmp_path / "checkpoints" / "model_1.pt")  # replay.pt is iteration 2's
    b.learn(1, progress=False)
    assert "warm restart" in b.resume_note and len(b.buffer) == 0
    assert b.iteration == 1


def test_inference_policy_is_deterministic_cpu_and_in_range():
    tr = _trainer("sac")
    pi = tr.inference_policy()
    obs = tr.env.get_observations()
    a1, a2 = pi(obs), pi(obs["policy"])
    assert torch.equal(a1, a2) and a1.shape == (8, tr.env.num_actions)
    assert a1.abs().max() <= 1.0 and hasattr(pi, "obs_normalizer") and hasattr(pi, "mlp")
