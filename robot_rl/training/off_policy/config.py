"""The algo section of an off-policy run as a plain dataclass; from_dict refuses unknown keys and bad values.

The ValueError names the key (`algo.<key>`); the command that builds the trainer turns it into a ConfigError.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field


@dataclass
class OffPolicyConfig:
    name: str = "td3"
    device: str = "cpu"
    # one iteration = steps_per_iteration env steps (each gives num_worlds transitions); train.iterations is a total
    steps_per_iteration: int = 16
    buffer_size: int = 1_000_000  # transitions (rounded up to whole env steps of num_worlds)
    batch_size: int = 1024
    learning_starts: int = 5_000  # transitions collected before the first gradient update
    updates_per_step: float = 2.0  # gradient updates per env step (may be fractional: 0.5 = every other step)
    gamma: float = 0.99
    n_step: int = 3
    tau: float = 0.01  # Polyak rate of the target networks
    actor_learning_rate: float = 3.0e-4
    critic_learning_rate: float = 3.0e-4
    weight_decay: float = 0.0
    policy_delay: int = 2  # critic updates per actor (and target) update
    actor_hidden_dims: list = field(default_factory=lambda: [128, 128])
    critic_hidden_dims: list = field(default_factory=lambda: [128, 128])
    obs_normalization: bool = True
    asymmetric: bool = True  # the critic reads the env's "critic" observation group when it has one
    init_action_scale: float = 0.01  # the actor's last layer is scaled by this: start near the zero action
    update_threads: int | None = None  # torch threads for the updates (None: all cores)
    save_replay: bool = True  # checkpoints/replay.pt beside the model files: exact resume (else warm restart)
    # TD3
    exploration_noise: float = 0.1  # std of the Gaussian added to the actor's action while collecting
    policy_noise: float = 0.2  # target policy smoothing
    noise_clip: float = 0.5
    # SAC
    init_alpha: float = 0.1
    learn_alpha: bool = True
    alpha_learning_rate: float = 3.0e-4
    target_entropy: float | None = None  # None: -num_actions
    log_std_min: float = -5.0
    log_std_max: float = 2.0

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        def bad(key: str, why: str) -> ValueError:
            return ValueError(f"algo.{key}={getattr(self, key)!r} is out of range: allowed {why}")

        if self.name not in ("td3", "sac"):
            raise ValueError(f"algo.name={self.name!r}: the off-policy learners are td3 and sac")
        if not isinstance(self.device, str) or not (self.device == "cpu" or self.device.startswith(("cuda", "mps"))):
            raise bad("device", "cpu, cuda, cuda:<n> or mps")
        for key in ("steps_per_iteration", "buffer_size", "batch_size", "n_step", "policy_delay"):
            v = getattr(self, key)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise bad(key, "an integer >= 1")
        starts = self.learning_starts
        if isinstance(starts, bool) or not isinstance(starts, int) or starts < 0:
            raise bad("learning_starts", "an integer >= 0")
        if self.update_threads is not None and (not isinstance(self.update_threads, int) or self.update_threads < 1):
            raise bad("update_threads", "an integer >= 1 or null")
        for key in ("actor_hidden_dims", "critic_hidden_dims"):
            v = getattr(self, key)
            if not isinstance(v, (list, tuple)) or not v or not all(isinstance(d, int) and d >= 1 for d in v):
                raise bad(key, "a non-empty list of integers >= 1")
        for key in ("obs_normalization", "asymmetric", "learn_alpha", "save_replay"):
            if not isinstance(getattr(self, key), bool):
                raise bad(key, "true or false")
        numbers = {
            "updates_per_step": (0.0, math.inf, False),
            "gamma": (0.0, 1.0, True),
            "tau": (0.0, 1.0, True),
            "actor_learning_rate": (0.0, math.inf, False),
            "critic_learning_rate": (0.0, math.inf, False),
            "alpha_learning_rate": (0.0, math.inf, False),
            "init_alpha": (0.0, math.inf, False),
            "init_action_scale": (0.0, math.inf, False),
        }
        for key, (lo, hi, hi_closed) in numbers.items():
            v = getattr(self, key)
            number = not isinstance(v, bool) and isinstance(v, (int, float))
            if not number or not (lo < v and (v <= hi if hi_closed else v < hi)):
                raise bad(key, f"a number in ({lo:g}, {hi:g}{']' if hi_closed else ')'}")
        for key in ("weight_decay", "exploration_noise", "policy_noise", "noise_clip"):
            v = getattr(self, key)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not (0.0 <= v < math.inf):
                raise bad(key, "a finite number >= 0")
        for key in ("log_std_min", "log_std_max", "target_entropy"):
            v = getattr(self, key)
            if v is None and key == "target_entropy":
                continue
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
                raise bad(key, "a finite number" + (" or null" if key == "target_entropy" else ""))
        if self.log_std_min >= self.log_std_max:
            raise bad("log_std_min", f"a number below algo.log_std_max ({self.log_std_max})")

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
