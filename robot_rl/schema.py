"""The config schema: the allowed range of every numeric option, and which keys may be added with '+'.

Hydra checks structure, config.load_config checks types; this module checks values, so that
`task.num_worlds=0` or `algo.gamma=1.5` is refused with one line naming the key, the value and the
allowed range, before a run directory exists or a simulator is built.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from omegaconf import DictConfig, ListConfig, OmegaConf

CONFIG_DIR = Path(__file__).resolve().parents[1] / "configs"


class ConfigError(ValueError):
    """A config or override the user must fix; the message is the whole explanation."""


SEED_MAX = 2**32 - 1  # numpy's seed range


def _num(x: float | None) -> str:
    return str(int(x)) if x is not None and float(x).is_integer() else f"{x:g}" if x is not None else ""


@dataclass(frozen=True)
class Range:
    """A numeric option's allowed values; sequences are checked element by element."""

    lo: float | None = None
    hi: float | None = None
    lo_open: bool = False  # lo itself is not allowed
    hi_open: bool = False
    integer: bool = False
    optional: bool = False  # null is allowed
    ordered: bool = False  # a sequence whose elements must not decrease ([lo, hi] pairs)

    def allowed(self) -> str:
        kind = "an integer" if self.integer else "a number"
        lo, hi = _num(self.lo), _num(self.hi)
        if self.lo is not None and self.hi is not None:
            text = f"{kind} in {'(' if self.lo_open else '['}{lo}, {hi}{')' if self.hi_open else ']'}"
        elif self.lo is not None:
            text = f"{kind} {'>' if self.lo_open else '>='} {lo}"
        elif self.hi is not None:
            text = f"{kind} {'<' if self.hi_open else '<='} {hi}"
        else:
            text = "any integer" if self.integer else "a finite number"
        return text + (" or null" if self.optional else "") + (", in increasing order" if self.ordered else "")

    def accepts(self, value: float) -> bool:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            return False
        if self.integer and not isinstance(value, int):
            return False
        if self.lo is not None and (value <= self.lo if self.lo_open else value < self.lo):
            return False
        return self.hi is None or (value < self.hi if self.hi_open else value <= self.hi)


@dataclass(frozen=True)
class Choice:
    """A string option with a fixed set of values."""

    values: tuple[str, ...]
    optional: bool = False

    def allowed(self) -> str:
        return "one of " + ", ".join(self.values) + (" or null" if self.optional else "")


Rule = Range | Choice

POS_INT = Range(1, integer=True)
NONNEG_INT = Range(0, integer=True)
SEED = Range(0, SEED_MAX, integer=True)
POSITIVE = Range(0, lo_open=True)  # durations, rates, radii, step sizes
NONNEG = Range(0)
PROB = Range(0, 1)  # probabilities and fractions
FINITE = Range()  # reward weights (either sign), positions
PIXELS = Range(16, 4096, integer=True)
RANDOMIZATION = Choice(("none", "train", "max"))
# rsl_rl.utils.resolve_nn_activation's names
ACTIVATIONS = (
    "elu", "selu", "relu", "crelu", "lrelu", "tanh", "sigmoid", "softplus", "gelu", "swish", "mish", "identity",
)  # fmt: skip

# Keys by their full dotted path.
RULES: dict[str, Rule] = {
    "seed": SEED,
    "train.iterations": POS_INT,
    "train.save_every": POS_INT,
    "eval.episodes": POS_INT,
    "eval.seed": SEED,
    "eval.randomization": RANDOMIZATION,
    "play.seconds": POSITIVE,
    "play.width": PIXELS,
    "play.height": PIXELS,
    "task.num_worlds": Range(1, 1 << 20, integer=True),
    "task.episode_length_s": POSITIVE,
    "task.randomization": RANDOMIZATION,
    "backend.nthread": NONNEG_INT,  # 0: every core
    "backend.torch_threads": POS_INT,
    # algo (ppo, ppo_swarm)
    "algo.num_steps_per_env": POS_INT,
    "algo.num_learning_epochs": POS_INT,
    "algo.num_mini_batches": POS_INT,
    "algo.learning_rate": POSITIVE,
    "algo.schedule": Choice(("adaptive", "fixed")),
    "algo.desired_kl": POSITIVE,
    "algo.gamma": PROB,
    "algo.lam": PROB,
    "algo.entropy_coef": NONNEG,
    "algo.clip_param": POSITIVE,
    "algo.max_grad_norm": POSITIVE,
    "algo.init_std": POSITIVE,
    "algo.activation": Choice(ACTIVATIONS),
    "algo.actor_hidden_dims": POS_INT,
    "algo.critic_hidden_dims": POS_INT,
    "algo.anchor_coef": NONNEG,
    "algo.update_threads": Range(1, integer=True, optional=True),
    "algo.swarm_hidden": Range(1, integer=True, optional=True),
    "algo.actor": Choice(("swarm_attention", "swarm_mlp", "mlp")),
    # guidance (keypoint, plan); the groups share seed and model
    "guidance.seed": SEED,
    "guidance.noise_seed": SEED,
    "guidance.noise_p": PROB,
    "guidance.width": PIXELS,
    "guidance.height": PIXELS,
    "guidance.per_object": POS_INT,
    "guidance.grid": POS_INT,
    "guidance.weights.progress": FINITE,
    "guidance.weights.success": FINITE,
    "guidance.weights.reach_radius": POSITIVE,
    "guidance.weights.waypoint_radius": POSITIVE,
    "guidance.model.timeout_s": POSITIVE,
    "guidance.model.max_retries": NONNEG_INT,
    "guidance.model.temperature": Range(0, 2),
    "guidance.model.retry_backoff_s": NONNEG,
    "guidance.base_gain": NONNEG,
    "guidance.residual_scale": NONNEG,
    "guidance.approach_gain": Range(0, 1, lo_open=True),
    "guidance.base_gain_final": Range(0, optional=True),
    "guidance.residual_scale_final": Range(0, optional=True),
    "guidance.anneal_env_steps": NONNEG_INT,
    "guidance.subgoal_timeout_s": POSITIVE,
    "guidance.bonus": NONNEG,
    "guidance.bonus_decay": PROB,
    "guidance.replan_after": POS_INT,
    "guidance.max_replans": NONNEG_INT,
    "guidance.wrong_options": POS_INT,
    "guidance.object_pose_noise_m": NONNEG,
    "guidance.pose_correction_m": NONNEG,
    # robot-rl imitate: imitation.<field> (robot_rl.training.imitation.DaggerConfig)
    "imitation.rounds": POS_INT,
    "imitation.steps_per_round": POS_INT,
    "imitation.beta0": PROB,
    "imitation.beta_decay": PROB,
    "imitation.buffer_size": POS_INT,
    "imitation.updates_per_round": NONNEG_INT,
    "imitation.batch_size": POS_INT,
    "imitation.learning_rate": POSITIVE,
    "imitation.max_grad_norm": POSITIVE,
    "imitation.critic_iterations": NONNEG_INT,
}

# robot-rl deploy check --<option> (robot_rl_ros.deploy_check's argparse names)
DEPLOY_CHECK_RULES: dict[str, Rule] = {
    "seconds": POSITIVE,
    "discovery_timeout": NONNEG,
    "max_age": POSITIVE,
    "domain_id": Range(0, 232, integer=True, optional=True),  # DDS ports overflow above 232
    "action_dim": Range(1, integer=True, optional=True),
    "goal": FINITE,
    "command": FINITE,
}

# task.params.<name>, whichever task has the field (sim/tasks/*.py dataclasses); rewards.* are any finite weight.
PARAM_RULES: dict[str, Rule] = {
    # crazyflie_hover, crazyflie_goto
    "goal": FINITE,
    "start_half_extent": NONNEG,
    "ground_start_prob": PROB,
    "max_start_tilt_deg": Range(0, 180),
    "max_start_speed": NONNEG,
    "success_radius": POSITIVE,
    "success_hold_s": NONNEG,
    "curriculum_iterations": NONNEG_INT,  # 0: no curriculum
    "curriculum_start_extent": NONNEG,
    "push_interval_s": POSITIVE,
    "push_speed": NONNEG,
    "goal_period_s": POSITIVE,
    "goal_low": FINITE,
    "goal_high": FINITE,
    # arm_reach, arm_push, arm_pick_place
    "push_joint_speed": NONNEG,
    "layouts": NONNEG_INT,
    "layout_seed": SEED,
    "layout_jitter_m": NONNEG,
    "camera_size": Range(8, 256, integer=True),
    "target_low": FINITE,
    "target_high": FINITE,
    "push_distance_m": Range(0.05, 0.3, optional=True, ordered=True),
    "ik.damping": NONNEG,
    "ik.max_pos_step": POSITIVE,
    "ik.max_rot_step": POSITIVE,
    "ik.max_joint_step": POSITIVE,
    "ik.null_gain": NONNEG,
    "ik.limit_margin": NONNEG,
    "ik.max_target_lead": POSITIVE,
    # crazyflie_swarm
    "num_drones": Range(1, 64, integer=True),
    "k_neighbours": NONNEG_INT,
    "neighbour_rate_hz": POSITIVE,
    "neighbour_latency_s": NONNEG,
    "tof_rate_hz": POSITIVE,
    "tof_noise_std": NONNEG,
    "tof_dropout": PROB,
    "tof_yaw_noise": NONNEG,
    "speed_mean": POSITIVE,
    "speed_std": NONNEG,
    "speed_range": Range(0, lo_open=True, ordered=True),
    "density": PROB,
    "cell_min": POSITIVE,
    "cell_max": POSITIVE,
    "scene_offset": NONNEG_INT,
    "gap_width": POSITIVE,
    "gap_fraction": PROB,
    # quadruped_velocity
    "lin_vel_x": Range(ordered=True),
    "lin_vel_y": Range(ordered=True),
    "yaw_rate": Range(ordered=True),
    "command_resample_s": NONNEG,  # 0: one command per episode
    "min_command_speed": NONNEG,
    "tracking_sigma": POSITIVE,
    "action_scale": POSITIVE,
    "kp": Range(0, lo_open=True, optional=True),
    "kd": Range(0, optional=True),
    "terrain_levels": POS_INT,
    "terrain_tile_m": POSITIVE,
    "terrain_seed": SEED,
    "max_init_level": NONNEG_INT,
    "success_lin_vel_error": POSITIVE,
    "success_yaw_rate_error": POSITIVE,
    "settle_s": NONNEG,
}


def rule_for(path: str) -> Rule | None:
    """The rule of a dotted config key, or None where the key has none (strings, paths, flags)."""
    if path.startswith("task.params."):
        name = path.removeprefix("task.params.")
        return FINITE if name.startswith("rewards.") else PARAM_RULES.get(name)
    return RULES.get(path)


def config_leaves(node, path: str = "") -> Iterator[tuple[str, object]]:
    """(dotted key, value) of every leaf; a list is one leaf (its elements share the key's rule)."""
    if isinstance(node, (DictConfig, Mapping)):
        for key in node:
            yield from config_leaves(node[key], f"{path}.{key}" if path else str(key))
    elif isinstance(node, ListConfig):
        yield path, list(node)
    else:
        yield path, node


def _check_value(path: str, value, rule: Rule) -> None:
    if value is None:
        if not rule.optional:
            raise ConfigError(f"{path}=null is out of range: allowed {rule.allowed()}")
        return
    if isinstance(rule, Choice):
        if value not in rule.values:
            raise ConfigError(f"{path}={value!r} is not allowed: {rule.allowed()}")
        return
    values = list(value) if isinstance(value, Sequence) and not isinstance(value, str) else [value]
    bad = not values if isinstance(value, (list, tuple)) else False
    bad = bad or not all(rule.accepts(v) for v in values)
    bad = bad or (rule.ordered and any(a > b for a, b in zip(values[:-1], values[1:], strict=True)))
    if bad:
        raise ConfigError(f"{path}={value!r} is out of range: allowed {rule.allowed()}")


def check_options(options: Mapping, rules: Mapping[str, Rule], prefix: str = "--") -> None:
    """Command-line options (argparse's names, '-' as '_') against their rules."""
    for name, rule in rules.items():
        if name in options:
            _check_value(prefix + name.replace("_", "-"), options[name], rule)


def check_ranges(cfg: DictConfig | Mapping) -> None:
    """Every value with a rule must satisfy it; every other number must at least be finite (no nan, inf)."""
    for path, value in config_leaves(cfg):
        rule = rule_for(path)
        if rule is not None:
            _check_value(path, value, rule)
        elif isinstance(value, float) and not math.isfinite(value):
            raise ConfigError(f"{path}={value!r} is out of range: allowed a finite number")


# -- keys added with '+' --------------------------------------------------------------------------
def _algo_keys() -> set[str]:
    """Optional algo keys: any key some algo config has (the trainer reads them with defaults)."""
    keys: set[str] = set()
    for p in sorted(Path(CONFIG_DIR, "algo").glob("*.yaml")):
        keys |= set(OmegaConf.load(p).keys())
    return keys


def _field_default(cls, dotted: str):
    """The default of a (nested) dataclass field, or KeyError with the names that would have been allowed."""
    head, _, rest = dotted.partition(".")
    fields = {f.name: f for f in dataclasses.fields(cls)}
    if head not in fields:
        raise KeyError(", ".join(sorted(fields)))
    f = fields[head]
    default = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
    if not rest:
        return default
    if not dataclasses.is_dataclass(default):
        raise KeyError(f"{head} is not a group")
    return _field_default(type(default), rest)


def check_added_keys(cfg: DictConfig, base: DictConfig) -> None:
    """Keys in cfg that the composed defaults lack ('+key=value') must be real options: a task's dataclass
    field (task.params.*, typed as its default) or an optional algo key; anything else is a typo."""
    from sim.tasks import TASKS

    base_keys = {path for path, _ in config_leaves(base)}
    algo_keys = None
    for path, value in config_leaves(cfg):
        if path in base_keys:
            continue
        if path.startswith("task.params.") and cfg.task.name in TASKS:
            name = path.removeprefix("task.params.")
            try:
                default = _field_default(TASKS[cfg.task.name], name)
            except KeyError as e:
                msg = f"unknown option '{path}' for task {cfg.task.name} (available: {e.args[0]})"
                raise ConfigError(msg) from None
            if isinstance(default, (bool, int, float, str)) and value is not None:
                want = float if type(default) is float else type(default)
                ok = isinstance(value, want) and not (want is not bool and isinstance(value, bool))
                if want is float and isinstance(value, int) and not isinstance(value, bool):
                    ok = True
                if not ok:
                    raise ConfigError(f"{path}: expected {want.__name__}, got {value!r}")
            continue
        if path.startswith("algo."):
            algo_keys = _algo_keys() if algo_keys is None else algo_keys
            if path.split(".")[1] in algo_keys:
                continue
        raise ConfigError(f"unknown config key '{path}' (check the spelling; '+' adds only existing options)")
