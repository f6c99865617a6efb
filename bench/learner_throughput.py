"""Throughput of the learners on crazyflie_hover: PPO, SAC and TD3 (ours), beside skrl's TD3 on the same env.

Prints, from one run and one process, env steps/s of collection and gradient updates/s for
  - PPO (rsl_rl's, as `algo=ppo` trains it): collection = act + env step + rollout storage; an update is one
    minibatch gradient step of the iteration's epochs x minibatches, so updates/s compare with the off-policy
    learners' (its rollout is `num_steps_per_env` steps, collected whole before each update block),
  - SAC and TD3 (robot_rl.training.off_policy: n-step sampling, LayerNorm twin critics, asymmetric critic):
    collection = actor + exploration + env step + replay insert; an update = sample + one critic update (the
    actor every policy_delay-th for TD3, every step for SAC with its temperature),
  - skrl 2.x TD3 (a maintained library: agent.act + record_transition into its RandomMemory, agent.update
    with gradient_steps=1) with the same widths, batch size and buffer size, on the same env,
and the ratio of each to the first learner measured (PPO). Collection and updates are timed in alternating
blocks so load changes cancel.

Libraries considered: skrl installs through requirements/constraints.txt without CUDA and without other
packages (pip install skrl -c requirements/constraints.txt); it is not a dependency of robot_rl, so the
skrl lines print only where it is importable (pip install skrl, or PYTHONPATH to a --target install).
(An earlier harness never set skrl's agent training flag, so its memory stayed empty and TD3.update raised on an
empty batch; the agent is now put in training mode as skrl's trainers do.)
torchrl 0.14 would replace the tensordict that rsl_rl runs on (0.15 here -> 0.14.3) and pull hoptorch:
not measured. LeRobot's SAC needs its own dataset/env stack: not measured. Why we keep our own learner
anyway: neither skrl nor torchrl's stock TD3/SAC has n-step returns with time-out bootstrapping from a
final observation in one batched step (skrl stores `terminated` only and bootstraps every truncation from
the post-reset observation it is given), and the bundle export needs our actor's normalizer + MLP.

    python bench/learner_throughput.py [--worlds 1024] [--batch 1024] [--hidden 128] [--blocks 4]
"""

from __future__ import annotations

import argparse
import os
import time

import torch
from omegaconf import OmegaConf

os.environ.setdefault("MUJOCO_GL", "egl")


def make(worlds: int, nthread: int, algo: str = "td3"):
    from robot_rl.config import load_config
    from robot_rl.envs import make_env

    cfg = load_config([f"algo={algo}", f"task.num_worlds={worlds}", f"backend.nthread={nthread}"])
    return cfg, make_env(cfg, final_observation=algo != "ppo")


class PPO:
    name = "PPO"

    def __init__(self, worlds, batch, hidden, nthread):
        from robot_rl.training.ppo_trainer import PPOTrainer

        cfg, self.env = make(worlds, nthread, "ppo")
        algo = OmegaConf.to_container(cfg.algo, resolve=True)
        self.tr = PPOTrainer(self.env, algo)
        self.alg = self.tr.alg
        self.alg.train_mode()
        self.rollout = self.tr.cfg["num_steps_per_env"]
        self.grad_steps = self.tr.cfg["algorithm"]["num_learning_epochs"] * self.tr.cfg["algorithm"]["num_mini_batches"]
        self.obs = self.env.get_observations()

    def collect_block(self, steps: int) -> int:
        """One whole rollout (`steps` is the off-policy learners' block; PPO's block is its rollout)."""
        with torch.inference_mode():
            for _ in range(self.rollout):
                actions = self.alg.act(self.obs)
                self.obs, rewards, dones, extras = self.env.step(actions)
                self.alg.process_env_step(self.obs, rewards, dones, extras)
        return self.rollout * self.env.num_worlds

    def update_block(self, steps: int) -> int:
        with torch.inference_mode():
            self.alg.compute_returns(self.obs)
        self.alg.update()
        return self.grad_steps


class OffPolicy:
    def __init__(self, worlds, batch, hidden, nthread, algo_name="td3"):
        from robot_rl.training.off_policy.trainer import OffPolicyTrainer

        self.name = algo_name.upper()
        cfg, self.env = make(worlds, nthread, algo_name)
        algo = OmegaConf.to_container(cfg.algo, resolve=True)
        algo.update(batch_size=batch, learning_starts=0, actor_hidden_dims=[hidden] * 2)
        algo.update(critic_hidden_dims=[hidden] * 2, buffer_size=200_000)
        self.tr = OffPolicyTrainer(self.env, algo)
        self.obs = self.env.get_observations()

    def collect_block(self, steps: int) -> int:
        for _ in range(steps):
            self.obs = self.tr.collect_step(self.obs)[0]
        return steps * self.env.num_worlds

    def update_block(self, steps: int) -> int:
        for _ in range(steps):
            self.tr._update()
        return steps


class Skrl:
    name = "skrl-TD3"

    def __init__(self, worlds, batch, hidden, nthread):
        import gymnasium
        from skrl.agents.torch.td3 import TD3, TD3_CFG
        from skrl.memories.torch import RandomMemory
        from skrl.models.torch import DeterministicMixin, Model
        from skrl.resources.noises.torch import GaussianNoise

        _, self.env = make(worlds, nthread)
        obs_dim = self.env.get_observations()["policy"].shape[1]
        n_act = self.env.num_actions
        obs_space = gymnasium.spaces.Box(-float("inf"), float("inf"), (obs_dim,))
        act_space = gymnasium.spaces.Box(-1.0, 1.0, (n_act,))

        def net(i, o, tanh):
            layers = [torch.nn.Linear(i, hidden), torch.nn.ReLU(), torch.nn.Linear(hidden, hidden), torch.nn.ReLU()]
            return torch.nn.Sequential(*layers, torch.nn.Linear(hidden, o), *([torch.nn.Tanh()] if tanh else []))

        class Actor(DeterministicMixin, Model):
            def __init__(self):
                Model.__init__(self, observation_space=obs_space, action_space=act_space, device="cpu")
                DeterministicMixin.__init__(self)
                self.net = net(obs_dim, n_act, True)

            def compute(self, inputs, role=""):
                return self.net(inputs["observations"]), {}

        class Critic(DeterministicMixin, Model):
            def __init__(self):
                Model.__init__(self, observation_space=obs_space, action_space=act_space, device="cpu")
                DeterministicMixin.__init__(self)
                self.net = net(obs_dim + n_act, 1, False)

            def compute(self, inputs, role=""):
                return self.net(torch.cat([inputs["observations"], inputs["taken_actions"]], 1)), {}

        models = {"policy": Actor(), "target_policy": Actor()}
        models.update({k: Critic() for k in ("critic_1", "critic_2", "target_critic_1", "target_critic_2")})
        memory = RandomMemory(memory_size=200_000 // worlds, num_envs=worlds, device="cpu")
        noise = GaussianNoise
        cfg = TD3_CFG(batch_size=batch, discount_factor=0.99, polyak=0.01, learning_rate=3e-4)
        cfg.exploration_noise, cfg.exploration_noise_kwargs = noise, {"mean": 0.0, "std": 0.2, "device": "cpu"}
        cfg.smooth_regularization_noise = noise
        cfg.smooth_regularization_noise_kwargs = {"mean": 0.0, "std": 0.2, "device": "cpu"}
        self.agent = TD3(
            models=models, memory=memory, observation_space=obs_space, action_space=act_space, device="cpu", cfg=cfg
        )
        self.agent.init()
        # the agent's own training flag: without it record_transition stores nothing and update() samples an
        # empty batch (what the first harness hit)
        self.agent.enable_training_mode(True, apply_to_models=True)
        self.obs = self.env.get_observations()["policy"]
        self.t = 0

    def collect(self):
        with torch.no_grad():
            actions, _ = self.agent.act(self.obs, None, timestep=self.t, timesteps=10**9)
        nxt, rew, dones, extras = self.env.step(actions)
        nxt = nxt["policy"]
        self.agent.record_transition(
            observations=self.obs,
            states=None,
            actions=actions,
            rewards=rew.unsqueeze(1),
            next_observations=nxt,
            next_states=None,
            terminated=(dones & ~extras["time_outs"]).unsqueeze(1),
            truncated=extras["time_outs"].unsqueeze(1),
            infos={},
            timestep=self.t,
            timesteps=10**9,
        )
        self.obs, self.t = nxt, self.t + 1

    def collect_block(self, steps: int) -> int:
        for _ in range(steps):
            self.collect()
        return steps * self.env.num_worlds

    def update_block(self, steps: int) -> int:
        for _ in range(steps):
            self.agent.update(timestep=self.t, timesteps=10**9)
        return steps


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--worlds", type=int, default=1024)
    p.add_argument("--batch", type=int, default=1024)
    p.add_argument("--hidden", type=int, default=128)
    p.add_argument("--nthread", type=int, default=0, help="MuJoCo threads (0: all cores)")
    p.add_argument("--blocks", type=int, default=4)
    p.add_argument("--steps", type=int, default=20, help="env steps and updates per block")
    a = p.parse_args()
    learners = [PPO(a.worlds, a.batch, a.hidden, a.nthread)]
    learners += [OffPolicy(a.worlds, a.batch, a.hidden, a.nthread, name) for name in ("sac", "td3")]
    try:
        learners.append(Skrl(a.worlds, a.batch, a.hidden, a.nthread))
    except ImportError as e:
        print(f"skrl not importable ({e}): only our learners are measured")
    warm = max(3, -(-a.batch // a.worlds) + 1)  # fill the replay buffers past one batch
    for lr in learners:
        lr.collect_block(warm)
        lr.update_block(1)
    seconds = {(lr.name, k): 0.0 for lr in learners for k in ("collect", "update")}
    counts = dict.fromkeys(seconds, 0)
    for _ in range(a.blocks):
        for lr in learners:
            for k, block in (("collect", lr.collect_block), ("update", lr.update_block)):
                t0 = time.perf_counter()
                counts[lr.name, k] += block(a.steps)
                seconds[lr.name, k] += time.perf_counter() - t0
    rate = {key: counts[key] / seconds[key] for key in seconds}
    threads = torch.get_num_threads()
    print(
        f"crazyflie_hover, {a.worlds} worlds, off-policy batch {a.batch}, {a.hidden}-wide nets, torch threads {threads}"
    )
    ref = learners[0].name
    for lr in learners:
        c, u = rate[lr.name, "collect"], rate[lr.name, "update"]
        ratio = (
            ""
            if lr.name == ref
            else (f"   x{ref}: collection {c / rate[ref, 'collect']:.2f}, updates {u / rate[ref, 'update']:.2f}")
        )
        print(f"  {lr.name:9s} collection {c:9,.0f} env steps/s   gradient updates {u:7.1f} /s{ratio}")


if __name__ == "__main__":
    main()
