"""The options of the PPO learner (algo=ppo, algo=ppo_swarm): the schema configs/algo/ppo*.yaml override."""

from __future__ import annotations

from dataclasses import dataclass

from robot_conventions.options import NONNEG, POS_INT, POSITIVE, PROB, Choice, Range, option

# rsl_rl.utils.resolve_nn_activation's names
ACTIVATIONS = (
    "elu", "selu", "relu", "crelu", "lrelu", "tanh", "sigmoid", "softplus", "gelu", "swish", "mish", "identity",
)  # fmt: skip


@dataclass
class PPOConfig:
    """rsl_rl's PPO settings, and ours around it (actor kind, per-drone envs, anchoring, update threads)."""

    name: str = "ppo"
    num_steps_per_env: int = option(24, POS_INT)
    num_learning_epochs: int = option(5, POS_INT)
    num_mini_batches: int = option(4, POS_INT)
    learning_rate: float = option(1.0e-3, POSITIVE)
    schedule: str = option("adaptive", Choice(("adaptive", "fixed")))
    desired_kl: float = option(0.01, POSITIVE)
    gamma: float = option(0.99, PROB)
    lam: float = option(0.95, PROB)
    entropy_coef: float = option(0.0, NONNEG)
    clip_param: float = option(0.2, POSITIVE)
    max_grad_norm: float = option(1.0, POSITIVE)
    init_std: float = option(0.5, POSITIVE)
    activation: str = option("elu", Choice(ACTIVATIONS))
    actor_hidden_dims: list[int] = option([64, 64], POS_INT)
    critic_hidden_dims: list[int] = option([128, 128], POS_INT)
    # mlp: rsl_rl's MLP on the whole observation; swarm_*: a per-drone network with shared weights
    actor: str = option("mlp", Choice(("swarm_attention", "swarm_mlp", "mlp")))
    swarm_hidden: int | None = option(None, Range(1, integer=True, optional=True))
    per_drone: bool = False  # each drone one of PPO's environments (robot_rl.envs.PerDroneEnv)
    update_threads: int | None = option(None, Range(1, integer=True, optional=True))  # null: every core
    anchor: str | None = None  # a checkpoint a fine-tune is pulled toward (with anchor_coef > 0)
    anchor_coef: float = option(0.0, NONNEG)
