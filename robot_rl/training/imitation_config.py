"""DAgger's settings (robot_rl.training.imitation), apart from the algorithm so that the config schema can
hold them without importing torch: `imitation.<field>=` on the command line."""

from __future__ import annotations

from dataclasses import dataclass

from robot_conventions.options import NONNEG_INT, POS_INT, POSITIVE, PROB, option


@dataclass
class DaggerConfig:
    teacher: str = ""  # the task's scripted expert (Task.TEACHERS); '' : the task's first
    rounds: int = option(8, POS_INT)
    steps_per_round: int = option(500, POS_INT)  # env steps per round; each step gives W samples (one per world)
    beta0: float = option(1.0, PROB)  # teacher probability in round 0
    beta_decay: float = option(0.5, PROB)  # round r (but the last) uses beta0 * beta_decay**r; the last round uses 0
    buffer_size: int = option(300_000, POS_INT)  # world-step samples kept (N drones each); the oldest are dropped first
    updates_per_round: int = option(1500, NONNEG_INT)  # Adam steps after each round
    batch_size: int = option(256, POS_INT)  # world-steps per Adam step (x N drones)
    learning_rate: float = option(3e-3, POSITIVE)
    max_grad_norm: float = option(1.0, POSITIVE)
    # execute every action (the teacher's too) with the actor's own Gaussian noise, as PPO's rollouts will:
    # the normalizer statistics then match PPO's, whose updates would otherwise rescale the inputs under the
    # warm-started weights (without it, PPO's noisy rollouts double the body-rate std within 20 iterations:
    # the student's rate damping halves and it tumbles); the student also learns to recover from the noise
    exploration_noise: bool = True
    # PPO iterations with the actor frozen after DAgger: the critic learns the student's values under the
    # run's rewards, so PPO's first updates follow advantages instead of an untrained critic's noise
    critic_iterations: int = option(10, NONNEG_INT)

    def __post_init__(self):
        if self.rounds < 1 or self.steps_per_round < 1 or self.batch_size < 1:
            raise ValueError("imitation: rounds, steps_per_round and batch_size must be >= 1")
        if self.updates_per_round < 0 or self.critic_iterations < 0:
            raise ValueError("imitation: updates_per_round and critic_iterations must be >= 0")
        if not 0.0 <= self.beta0 <= 1.0 or not 0.0 <= self.beta_decay <= 1.0:
            raise ValueError(f"imitation.beta0 and beta_decay are in [0, 1], not {self.beta0}, {self.beta_decay}")
