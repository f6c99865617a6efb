"""The algo section of an off-policy run as a plain dataclass; from_dict refuses unknown keys and bad values.

The ValueError names the key (`algo.<key>`); the command that builds the trainer turns it into a ConfigError.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from robot_conventions.options import (
    FINITE,
    NONNEG,
    NONNEG_INT,
    POS_INT,
    POSITIVE,
    Choice,
    Range,
    check_option,
    option,
    rule_of,
)

UNIT_OPEN_LOW = Range(0, 1, lo_open=True)  # discounts and Polyak rates: (0, 1]


@dataclass
class OffPolicyConfig:
    name: str = option("td3", Choice(("td3", "sac")))
    device: str | None = None  # cpu, cuda, cuda:<n> or mps; None: the env's (backend.device)
    # one iteration = steps_per_iteration env steps (each gives num_worlds transitions); train.iterations is a total
    steps_per_iteration: int = option(16, POS_INT)
    buffer_size: int = option(1_000_000, POS_INT)  # transitions (rounded up to whole env steps of num_worlds)
    batch_size: int = option(1024, POS_INT)
    learning_starts: int = option(5_000, NONNEG_INT)  # transitions collected before the first gradient update
    # gradient updates per env step (may be fractional: 0.5 = every other step)
    updates_per_step: float = option(2.0, POSITIVE)
    gamma: float = option(0.99, UNIT_OPEN_LOW)
    n_step: int = option(3, POS_INT)
    tau: float = option(0.01, UNIT_OPEN_LOW)  # Polyak rate of the target networks
    actor_learning_rate: float = option(3.0e-4, POSITIVE)
    critic_learning_rate: float = option(3.0e-4, POSITIVE)
    weight_decay: float = option(0.0, NONNEG)
    policy_delay: int = option(2, POS_INT)  # critic updates per actor (and target) update
    actor_hidden_dims: list[int] = option([128, 128], POS_INT)
    critic_hidden_dims: list[int] = option([128, 128], POS_INT)
    obs_normalization: bool = True
    asymmetric: bool = True  # the critic reads the env's "critic" observation group when it has one
    init_action_scale: float = option(0.01, POSITIVE)  # the actor's last layer is scaled by this: start near 0
    update_threads: int | None = option(None, Range(1, integer=True, optional=True))  # torch threads (None: all)
    save_replay: bool = True  # checkpoints/replay.pt beside the model files: exact resume (else warm restart)
    # RLPD: a dataset of `robot-rl collect` (.npz); each batch holds prior_ratio of its transitions (0.5: RLPD's
    # symmetric sampling), the rest from the online replay
    prior_data: str | None = None
    prior_ratio: float = option(0.5, Range(0, 1, lo_open=True, hi_open=True))
    # Offline pretraining, then online fine-tuning (TD3+BC, Fujimoto & Gu 2021): pretrain_updates updates on the
    # prior data alone before the first env step; with bc_weight > 0 the actor's loss is
    # -Q / mean|Q| + bc_weight * |pi(s) - a|^2 on the batch's prior transitions (TD3 only)
    pretrain_updates: int = option(0, NONNEG_INT)
    bc_weight: float = option(0.0, NONNEG)
    # With prior data the observation statistics are the prior data's, held there: online statistics would move
    # the inputs under the pretrained actor (arm_pick_place: an offline policy at 0.30 success fell to 0.02 after
    # 16 env steps of 128 worlds, before any update). false: they keep running over the online observations.
    hold_prior_normalization: bool = True
    # TD3
    exploration_noise: float = option(0.1, NONNEG)  # std of the Gaussian added to the actor's action while collecting
    policy_noise: float = option(0.2, NONNEG)  # target policy smoothing
    noise_clip: float = option(0.5, NONNEG)
    # SAC
    init_alpha: float = option(0.1, POSITIVE)
    learn_alpha: bool = True
    alpha_learning_rate: float = option(3.0e-4, POSITIVE)
    target_entropy: float | None = option(None, Range(optional=True))  # None: -num_actions
    log_std_min: float = option(-5.0, FINITE)
    log_std_max: float = option(2.0, FINITE)

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        """The ranges written beside the fields (the same the config schema checks), the list shapes and what
        ties two fields together; ValueError names the key."""
        for f in dataclasses.fields(self):
            rule = rule_of(f)
            value = getattr(self, f.name)
            if rule is not None:
                check_option(f"algo.{f.name}", value, rule)
            elif f.type == "bool" and not isinstance(value, bool):
                raise ValueError(f"algo.{f.name}={value!r} is out of range: allowed true or false")
        if self.device is not None and (
            not isinstance(self.device, str) or not (self.device == "cpu" or self.device.startswith(("cuda", "mps")))
        ):
            raise ValueError(f"algo.device={self.device!r} is out of range: allowed cpu, cuda, cuda:<n>, mps or null")
        if self.device is not None and self.device != "cpu":
            from robot_rl.devices import unavailable  # torch, only for a device other than the CPU

            if why := unavailable(self.device):
                raise ValueError(f"algo.device={self.device}: {why}")
        for key in ("actor_hidden_dims", "critic_hidden_dims"):
            if not isinstance(getattr(self, key), (list, tuple)):
                raise ValueError(f"algo.{key}={getattr(self, key)!r} is out of range: allowed a list of integers")
        if (self.pretrain_updates or self.bc_weight) and not self.prior_data:
            key = "pretrain_updates" if self.pretrain_updates else "bc_weight"
            raise ValueError(f"algo.{key} learns from prior data: set algo.prior_data=<dataset>.npz")
        if self.bc_weight and self.name != "td3":
            raise ValueError(f"algo.bc_weight is TD3+BC's term: algo=td3, not algo={self.name}")
        if self.log_std_min >= self.log_std_max:
            raise ValueError(
                f"algo.log_std_min={self.log_std_min!r} is out of range: allowed a number below algo.log_std_max "
                f"({self.log_std_max})"
            )

    @staticmethod
    def from_dict(algo: dict) -> OffPolicyConfig:
        """The algo section (a plain dict, as OmegaConf.to_container gives it) -> config; ValueError names the key."""
        known = {f.name for f in dataclasses.fields(OffPolicyConfig)}
        unknown = sorted(set(algo) - known)
        if unknown:
            known_list = ", ".join(sorted(known))
            raise ValueError(f"unknown key algo.{unknown[0]} for algo={algo.get('name')} (known: {known_list})")
        values = dict(algo)
        for key in ("actor_hidden_dims", "critic_hidden_dims"):
            if isinstance(values.get(key), tuple):
                values[key] = list(values[key])
        return OffPolicyConfig(**values)
