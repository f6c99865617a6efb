"""Imitation warm start (DAgger) for PPO: the actor learns a task's teacher before reinforcement learning.

    robot-rl imitate task=crazyflie_swarm algo=ppo_swarm task.num_worlds=64 imitation.rounds=8 seed=0
    robot-rl train task=crazyflie_swarm algo=ppo_swarm init_from=<the imitate run directory> ...

(robot_rl.commands.imitate_one writes the run directory; this module is the algorithm.) Pass the imitate
command the reward settings of the PPO run that follows (e.g. task.params.rewards.safety_guide): the critic
warm-up learns values under them.

The teacher is the task's scripted expert (Task.teacher, in policy action units [-1, 1]; Task.TEACHERS names
them, the default first):
- crazyflie_hover (rpyt): `position_controller`, a cascaded position controller over the firmware's attitude
  loop, its hover thrust found by integral action on the goal error integral the policy observes
  (sim.tasks.crazyflie.hover_teacher). `robot-rl train train.warm_start=dagger` runs DAgger in the same run
  before PPO (the demo's recipe);
- crazyflie_swarm: `sensed_safe_command` (default), the CBF-filtered go-to planner whose barriers come from
  what the policy senses (ToF beams, delayed neighbour broadcasts); a ToF-only student can imitate it;
- `safe_command`: the same filter on the true geometry (stage 1's safety guide). Its reactions to obstacles
  in the ToF deck's blind diagonals cannot be predicted from the observation: measured on 16 held-out
  scenes, its students reached 0.37 success against 0.47 for students of the sensed teacher.

DAgger (Ross et al. 2011) over the batched env, one round at a time:
- roll out: each world-step executes the teacher's action with probability beta, else the student's mean
  action, plus the actor's own Gaussian exploration noise (see DaggerConfig.exploration_noise); beta decays
  geometrically from beta0 in round 0 and is 0 in the last round, so later rounds visit the states the
  student itself reaches; the label is always the teacher's noiseless action at the visited state;
- aggregate (observation, teacher action) pairs in a bounded buffer (the oldest are dropped);
- update the actor's observation normalizer with the round's observations (as PPO does after a rollout)
  and regress the actor's mean action on the buffer with MSE (Adam).
Then a few PPO iterations with the actor frozen warm up the critic (warm_up_critic).
The student is the PPO trainer's own actor (same class, normalizer and weights layout), and the result is
saved by the trainer as <run>/checkpoints/model_0.pt, so `init_from` loads it like any PPO checkpoint:
iteration 0, the normalizer statistics the student was trained with (PPO keeps updating them from there),
the warmed-up critic and its optimizer state, and total_steps / train_time_s counting the imitation's env
steps and time (a run that starts from it accounts for them, as stage 2 accounts for stage 1).
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass, fields

import torch
from tensordict import TensorDict
from tqdm import tqdm

from robot_rl.training.imitation_config import DaggerConfig


def dagger_config(overrides: dict[str, str]) -> DaggerConfig:
    """DaggerConfig from 'field' -> 'value' strings (the CLI's imitation.<field>=<value>), types checked."""
    known = {f.name: f.type for f in fields(DaggerConfig)}
    kw = {}
    for key, value in overrides.items():
        if key not in known:
            raise ValueError(f"unknown imitation setting '{key}' (available: {', '.join(known)})")
        cast = {"float": float, "int": int, "str": str, "bool": _bool}[known[key]]
        try:
            kw[key] = cast(value)
        except ValueError:
            raise ValueError(f"imitation.{key}: expected {known[key]}, got {value!r}") from None
    return DaggerConfig(**kw)


def _bool(value: str) -> bool:
    if value.lower() not in ("true", "false"):
        raise ValueError(value)
    return value.lower() == "true"


def beta_schedule(round_index: int, rounds: int, beta0: float, decay: float) -> float:
    """Teacher probability of one round: beta0 decay**r, and 0 in the last round (a single round: beta0).

    Geometric, as in DAgger's paper: the student soon flies most steps, so most samples come from the
    states it reaches itself (nearer obstacles than the teacher ever flies, where it must learn to brake)."""
    if rounds > 1 and round_index == rounds - 1:
        return 0.0
    return beta0 * decay**round_index


def teacher_name(task, teacher: str = "") -> str:
    """The named teacher, or the task's first; ValueError on a task without one."""
    teachers = task.TEACHERS
    if not teachers:
        raise ValueError(f"task '{task.name}' has no teacher to imitate")
    return teacher or teachers[0]


def teacher_actions(task, teacher: str = "", num_actions: int | None = None) -> torch.Tensor:
    """The task's teacher in policy action units: (envs, num_actions) in [-1, 1]; num_actions: the env's
    (default: the whole team per world; 4 when each drone is an environment, robot_rl.envs.PerDroneEnv)."""
    actions = task.teacher(teacher_name(task, teacher))
    shape = (actions.shape[0], -1) if num_actions is None else (-1, num_actions)
    return actions.reshape(shape).float()


@dataclass
class Buffer:
    """A ring of (observation, teacher action) pairs, one row per world-step."""

    obs: torch.Tensor
    labels: torch.Tensor
    size: int = 0
    head: int = 0

    @staticmethod
    def empty(capacity: int, obs_dim: int, action_dim: int, device: torch.device | str = "cpu") -> Buffer:
        return Buffer(torch.zeros(capacity, obs_dim, device=device), torch.zeros(capacity, action_dim, device=device))

    def add(self, obs: torch.Tensor, labels: torch.Tensor) -> None:
        cap = self.obs.shape[0]
        idx = (self.head + torch.arange(obs.shape[0], device=self.obs.device)) % cap
        self.obs[idx], self.labels[idx] = obs, labels
        self.head = int((self.head + obs.shape[0]) % cap)
        self.size = min(cap, self.size + obs.shape[0])

    def sample(self, batch: int, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        idx = torch.randint(0, self.size, (batch,), generator=gen, device=gen.device)
        return self.obs[idx], self.labels[idx]


def mean_action(actor, obs: torch.Tensor) -> torch.Tensor:
    """The actor's deterministic action (its Gaussian mean) on policy observations, normalizer included:
    the same path PPO's rollouts and evaluation use."""
    return actor(TensorDict({"policy": obs}, batch_size=[obs.shape[0]]))


def imitation_loss(actor, obs: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.mse_loss(mean_action(actor, obs), labels)


def exploration_std(actor, mean: torch.Tensor) -> torch.Tensor:
    """The std of the actor's action distribution at these mean actions (rsl_rl's Gaussian: its std parameter)."""
    actor.distribution.update(mean)
    return actor.output_std


def collect_round(env, actor, cfg: DaggerConfig, beta: float, gen: torch.Generator, progress=None) -> dict:
    """Roll out the beta-mixture for cfg.steps_per_round env steps; return the visited observations, teacher
    labels and the episodes that ended (success and crash rates of the task's outcome)."""
    obs_rows, label_rows, success, crash = [], [], [], []
    obs = env.get_observations()
    with torch.no_grad():
        for _ in range(cfg.steps_per_round):
            label = teacher_actions(env.task, cfg.teacher, env.num_actions)
            use_teacher = torch.rand(env.num_envs, generator=gen, device=gen.device) < beta
            mean = mean_action(actor, obs["policy"])
            act = torch.where(use_teacher.unsqueeze(1), label, mean)
            if cfg.exploration_noise:
                act = act + exploration_std(actor, mean) * torch.randn(act.shape, generator=gen, device=gen.device)
            obs_rows.append(obs["policy"].clone())
            label_rows.append(label)
            obs, _, dones, extras = env.step(act)
            if dones.any():
                final = extras["final"]
                success += final["success"].tolist()
                crash += final["crash"].tolist()
            if progress is not None:
                progress.update(1)
    return {"obs": torch.cat(obs_rows), "labels": torch.cat(label_rows), "success": success, "crash": crash}


def fit(
    actor,
    buffer: Buffer,
    optimizer: torch.optim.Optimizer,
    cfg: DaggerConfig,
    gen: torch.Generator,
    rows_per_world_step: int = 1,
) -> float:
    """cfg.updates_per_round Adam steps of MSE on the buffer; returns the mean loss of the last 50 steps."""
    params = [p for p in actor.mlp.parameters() if p.requires_grad]
    losses = []
    for _ in range(cfg.updates_per_round):
        obs, labels = buffer.sample(cfg.batch_size * rows_per_world_step, gen)
        loss = imitation_loss(actor, obs, labels)
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, cfg.max_grad_norm)
        optimizer.step()
        losses.append(loss.item())
    tail = losses[-50:]
    return sum(tail) / len(tail) if tail else float("nan")


def _rate(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None  # None: no episode ended in the round


def run_dagger(env, actor, cfg: DaggerConfig, seed: int = 0, progress: bool = True) -> list[dict]:
    """Train `actor` (an rsl_rl actor on env's "policy" observations) by DAgger on env's task teacher.

    Returns one record per round: beta, the loss on the round's fresh samples before fitting (the student's
    error on the states it is about to learn, the number DAgger drives down), the training loss after
    fitting, the buffer size, and the success / crash rate of the episodes that ended in the round.
    """
    teacher_actions(env.task, cfg.teacher)  # fail before any rollout on a task without the teacher
    gen = torch.Generator(device=env.device).manual_seed(seed)  # draws, buffer and actor on the env's device
    obs_dim, action_dim = env.get_observations()["policy"].shape[1], env.num_actions
    # buffer_size and batch_size count world-steps: with one environment per drone (PerDroneEnv) a world-step
    # is N rows, so the same settings keep and sample the same data as with the team actor
    rows = env.num_envs // env.num_worlds
    capacity = min(cfg.buffer_size * rows, cfg.rounds * cfg.steps_per_round * env.num_envs)  # no memory it cannot use
    buffer = Buffer.empty(capacity, obs_dim, action_dim, env.device)
    params = [p for p in actor.mlp.parameters() if p.requires_grad]
    optimizer = torch.optim.Adam(params, lr=cfg.learning_rate)
    actor.train()  # the normalizer only updates in training mode
    history = []
    bar = tqdm(
        total=cfg.rounds * cfg.steps_per_round, desc="imitate", unit="step", disable=not progress, dynamic_ncols=True
    )
    for r in range(cfg.rounds):
        beta = beta_schedule(r, cfg.rounds, cfg.beta0, cfg.beta_decay)
        t0 = time.perf_counter()
        data = collect_round(env, actor, cfg, beta, gen, bar)
        collect_s = time.perf_counter() - t0
        buffer.add(data["obs"], data["labels"])
        actor.update_normalization(TensorDict({"policy": data["obs"]}, batch_size=[data["obs"].shape[0]]))
        with torch.no_grad():
            fresh = imitation_loss(actor, data["obs"], data["labels"]).item()
        train_loss = fit(actor, buffer, optimizer, cfg, gen, rows)
        rec = {
            "round": r,
            "beta": round(beta, 4),
            "fresh_loss": fresh,
            "train_loss": train_loss,
            "buffer": buffer.size,
            "episodes": len(data["success"]),
            "success": _rate(data["success"]),
            "crash": _rate(data["crash"]),
            "collect_s": round(collect_s, 1),
            "fit_s": round(time.perf_counter() - t0 - collect_s, 1),
        }
        history.append(rec)
        bar.set_postfix(beta=f"{beta:.2f}", loss=f"{fresh:.4f}->{train_loss:.4f}", episodes=rec["episodes"])
    bar.close()
    return history


def warm_up_critic(trainer, iterations: int, progress: bool = True) -> dict:
    """`iterations` PPO iterations of the trainer with its actor frozen: rsl_rl's own returns and value loss
    train the critic on the student's (noisy) rollouts. Afterwards the iteration count is 0 again (the actor
    is unchanged: a run started from the checkpoint trains its full iteration budget) and the learning rate is
    the initial one (the adaptive schedule sees zero KL here and would raise it); env steps and time stay
    counted in trainer.total_steps and train_time_s."""
    alg = trainer.alg
    lr = alg.learning_rate
    frozen = [p for p in alg.get_policy().parameters() if p.requires_grad]
    for p in frozen:
        p.requires_grad_(False)
    try:
        result = trainer.learn(iterations, progress=progress)
        result["mean_return"] = None if math.isnan(result["mean_return"]) else result["mean_return"]
    finally:
        for p in frozen:
            p.requires_grad_(True)
    alg.learning_rate = lr
    for group in alg.optimizer.param_groups:
        group["lr"] = lr
    trainer.iteration = 0
    return result


def dagger_warm_start(trainer, cfg: DaggerConfig, seed: int, progress: bool = True) -> dict:
    """DAgger on the trainer's actor, then the critic warm-up; the trainer's env steps and training time then
    count both (a run that goes on from here accounts for them). Returns the imitation.json record."""
    t0 = time.perf_counter()
    history = run_dagger(trainer.env, trainer.alg.get_policy(), cfg, seed=seed, progress=progress)
    critic = warm_up_critic(trainer, cfg.critic_iterations, progress)
    wall = time.perf_counter() - t0
    trainer.total_steps += cfg.rounds * cfg.steps_per_round * trainer.env.num_worlds
    trainer.train_time_s = wall
    critic = {k: critic[k] for k in ("total_steps", "train_time_s", "mean_return")}
    return {"config": asdict(cfg), "rounds": history, "critic_warm_up": critic, "wall_s": round(wall, 2)}


def summary_line(record: dict, total_steps: int) -> str:
    last = record["rounds"][-1]
    return (
        f"imitation wall time: {record['wall_s']:.1f} s for {total_steps:,} env steps; last round (beta "
        f"{last['beta']:g}): loss {last['fresh_loss']:.4f} on its fresh samples, {last['train_loss']:.4f} after "
        "fitting"
    )
