"""The config schema: Hydra structured configs made of the config dataclasses, one per config group option.

The root (RunConfig: seed, train, eval, play), each task's options (the task dataclass's fields, under
`task.params`), the learner's (PPOConfig, ...), guidance's (KeypointGuidanceConfig, PlanGuidanceConfig) and
the backend's are registered in Hydra's ConfigStore; every YAML file under configs/ names its schema in
its defaults list and only overrides values. Hydra then refuses a wrong type or an unknown key itself. The
allowed values are written beside each field (robot_conventions.options.option) and checked here, so
`task.num_worlds=0` or `algo.gamma=1.5` is refused with one line naming the key, the value and the range,
before a run directory exists or a simulator is built.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from omegaconf import MISSING, DictConfig, ListConfig

from robot_conventions.options import (
    DEVICE,
    NONNEG,
    NONNEG_INT,
    PIXELS,
    POS_INT,
    POSITIVE,
    RANDOMIZATION,
    SEED,
    Choice,
    OptionError,
    Range,
    Rule,
    check_option,
    option,
    rule_of,
)
from robot_rl.training.imitation_config import DaggerConfig

CONFIG_DIR = Path(__file__).resolve().parents[1] / "configs"
FINITE_NUMBER = Range()


class ConfigError(ValueError):
    """A config or override the user must fix; the message is the whole explanation."""


# -- the root and the groups without a dataclass of their own ----------------------------------------
@dataclass
class TrainConfig:
    iterations: int = option(300, NONNEG_INT)  # 0 only after a warm start (it is the run's policy then)
    save_every: int = option(25, POS_INT)
    progress: bool = True
    # dagger: the actor first imitates the task's scripted expert (DAgger, the imitation.* settings) in the
    # same run, then trains `iterations` PPO iterations from there; none: from scratch
    warm_start: str = option("none", Choice(("none", "dagger")))


@dataclass
class Conditions:
    """What episodes run under: the task group's are training's, eval's are the evaluation's."""

    randomization: str = option("train", RANDOMIZATION)
    obs_noise: bool = True
    action_latency: bool = True
    pushes: bool = True


@dataclass
class EvalConfig(Conditions):
    episodes: int = option(1024, POS_INT)
    seed: int = option(12345, SEED)
    pushes: bool = False  # the standard evaluation pushes nobody (eval.pushes=true: a stress evaluation)


@dataclass
class PlayConfig:
    seconds: float = option(8.0, POSITIVE)
    width: int = option(480, PIXELS)
    height: int = option(352, PIXELS)
    camera: str | None = None


BACKEND_NAMES = ("mujoco", "mjwarp")  # sim.backends.BACKENDS (schema stays importable without the simulator)


@dataclass
class BackendConfig:
    name: str = "mujoco"
    nthread: int = option(0, NONNEG_INT)  # 0: every core
    torch_threads: int = option(1, POS_INT)
    # where the physics runs; the env, its task and the learners' networks and buffers follow it (mujoco: cpu)
    device: str = option("cpu", DEVICE)


@dataclass
class MjWarpBackendConfig(BackendConfig):
    capture_graph: bool = True  # replay each control period's substeps from a captured warp graph


@dataclass
class TaskGroupConfig(Conditions):
    """What every task group has; `params` is the task dataclass's own options (task_group_schema)."""

    name: str = MISSING
    action_mode: str = MISSING
    num_worlds: int = option(1024, Range(1, 1 << 20, integer=True))
    episode_length_s: float = option(8.0, POSITIVE)


@dataclass
class NoGuidance:
    name: str = "none"


@dataclass
class RunConfig:
    seed: int = option(0, SEED)
    run_name: str | None = None
    runs_root: str = "runs"
    resume: str | None = None  # a run directory to continue from its latest checkpoint
    resume_finished: bool = False  # resume= of a finished run trains it further only when this is set
    init_from: str | None = None  # a NEW run starts from this checkpoint; it trains train.iterations more
    # tensorboard: <run>/tb; wandb: TensorBoard and a Weights & Biases run in offline mode (<run>/wandb, never the
    # network; `wandb sync <run>/wandb/offline-run-*` uploads it later)
    logger: str = option("tensorboard", Choice(("tensorboard", "wandb")))
    train: TrainConfig = field(default_factory=TrainConfig)
    imitation: DaggerConfig = field(default_factory=DaggerConfig)  # train.warm_start=dagger and robot-rl imitate
    eval: EvalConfig = field(default_factory=EvalConfig)
    play: PlayConfig = field(default_factory=PlayConfig)
    task: Any = MISSING  # typed by the chosen group option's schema
    algo: Any = MISSING
    backend: Any = MISSING
    guidance: Any = MISSING


# -- group options -> their dataclasses -----------------------------------------------------------
def _algo_classes() -> dict[str, type]:
    from robot_rl.training.off_policy.config import OffPolicyConfig
    from robot_rl.training.ppo_config import PPOConfig

    return {"ppo": PPOConfig, "ppo_swarm": PPOConfig, "td3": OffPolicyConfig, "sac": OffPolicyConfig}


def _guidance_classes() -> dict[str, type]:
    from robot_rl.guidance.kagi import KeypointGuidanceConfig
    from robot_rl.guidance.plan.config import PlanGuidanceConfig

    return {"none": NoGuidance, "keypoint": KeypointGuidanceConfig, "plan": PlanGuidanceConfig}


def _field_types(cls: type) -> dict[str, Any]:
    """A dataclass's field types, each resolved in the module of the class that declares it (a task's bases
    live in other modules, and one of them annotates names it imports only for type checking)."""
    types: dict[str, Any] = {}
    names = {f.name for f in dataclasses.fields(cls)}
    for klass in reversed(cls.__mro__):
        for name, annotation in klass.__dict__.get("__annotations__", {}).items():
            if name in names:
                if isinstance(annotation, str):
                    annotation = eval(annotation, vars(sys.modules[klass.__module__]))  # noqa: S307 (our own source)
                types[name] = annotation
    return types


def _copy_field(f: dataclasses.Field, **change) -> dataclasses.Field:
    kw = {"default": f.default, "default_factory": f.default_factory, "metadata": f.metadata} | change
    return dataclasses.field(**kw)


def group_schema(cls: type, name: str | None, exclude: tuple[str, ...] = ()) -> type:
    """A config group option's schema: `name` (defaulting to the option; None: no name) and cls's fields."""
    types = _field_types(cls)
    fields = [("name", str, dataclasses.field(default=name))] if name is not None else []
    fields += [
        (f.name, types[f.name], _copy_field(f))
        for f in dataclasses.fields(cls)
        if f.name not in exclude and f.name != "name"
    ]
    return dataclasses.make_dataclass(f"{cls.__name__}Options", fields)


@functools.cache
def task_group_schema(task: str) -> type:
    """The task group of one task: TaskGroupConfig's fields and `params`, the task dataclass's options (its
    action_mode is the group's own key)."""
    from sim.tasks import TASKS

    params = group_schema(TASKS[task], None, exclude=("action_mode",))
    return dataclasses.make_dataclass(
        f"{TASKS[task].__name__}Group",
        [("name", str, dataclasses.field(default=task)), ("params", params, dataclasses.field(default_factory=params))],
        bases=(TaskGroupConfig,),
    )


def task_options(task: str, params) -> dict:
    """make_task's keyword arguments from a task's params (a composed node or a run's saved YAML): typed by
    the task's schema, nested options as their dataclasses (RewardWeights, DiffIK)."""
    from omegaconf import OmegaConf

    params_type = _field_types(task_group_schema(task))["params"]
    typed = OmegaConf.merge(OmegaConf.structured(params_type), params if params is not None else {})
    options = OmegaConf.to_object(typed)
    out = {f.name: getattr(options, f.name) for f in dataclasses.fields(options)}
    for f in dataclasses.fields(params_type):  # OmegaConf gives lists; a tuple option stays a tuple
        if isinstance(f.default, tuple) and isinstance(out[f.name], list):
            out[f.name] = tuple(out[f.name])
    return out


@functools.cache
def option_schema(group: str, name: str) -> type | None:
    """The schema class of one option of a config group, or None where it has none (an unknown name)."""
    from sim.tasks import TASKS

    if group == "task":
        return task_group_schema(name) if name in TASKS else None
    if group == "backend":
        return {"mujoco": BackendConfig, "mjwarp": MjWarpBackendConfig}.get(name)
    classes = _algo_classes() if group == "algo" else _guidance_classes() if group == "guidance" else {}
    return group_schema(classes[name], name) if name in classes else None


def register_schemas() -> None:
    """Put every schema into Hydra's ConfigStore: `robot_rl_schema` (the root) and `schema/<group>/<option>`,
    which configs/<group>/<option>.yaml extends. Idempotent."""
    from hydra.core.config_store import ConfigStore

    from sim.tasks import TASKS

    store = ConfigStore.instance()
    store.store(name="robot_rl_schema", node=RunConfig)
    options = {
        "task": sorted(TASKS),
        "algo": sorted(_algo_classes()),
        "guidance": sorted(_guidance_classes()),
        "backend": list(BACKEND_NAMES),
    }
    for group, names in options.items():
        for name in names:
            store.store(group=f"schema/{group}", name=name, node=option_schema(group, name))


# -- allowed values ---------------------------------------------------------------------------------
def _node_schema(cfg, head: str) -> type | None:
    """The schema of a top-level section of cfg: a group's by the option it names, the root's otherwise."""
    if head in ("task", "algo", "guidance", "backend"):
        node = cfg.get(head) if isinstance(cfg, (Mapping, DictConfig)) else None
        name = node.get("name") if isinstance(node, (Mapping, DictConfig)) else None
        return option_schema(head, str(name)) if name is not None else None
    if head == "imitation":
        return DaggerConfig
    return None


def rule_for(cfg, path: str) -> Rule | None:
    """The rule of a dotted key of cfg (a composed config, a run's config.yaml or a plain dict of sections),
    from the dataclass field it names; a rule on a dataclass field covers the leaves below it without one."""
    head, *rest = path.split(".")
    schema = _node_schema(cfg, head)
    if schema is None:
        schema, rest = RunConfig, [head, *rest]
    inherited = None
    for i, key in enumerate(rest):
        fields = {f.name: f for f in dataclasses.fields(schema)} if dataclasses.is_dataclass(schema) else {}
        if key not in fields:
            return inherited
        rule = rule_of(fields[key])
        if i == len(rest) - 1:
            return rule or inherited
        inherited = rule or inherited
        schema = _field_types(schema).get(key)
    return inherited


def config_leaves(node, path: str = "") -> Iterator[tuple[str, object]]:
    """(dotted key, value) of every leaf; a list is one leaf (its elements share the key's rule)."""
    if isinstance(node, (DictConfig, Mapping)):
        for key in node:
            yield from config_leaves(node[key], f"{path}.{key}" if path else str(key))
    elif isinstance(node, (ListConfig, list, tuple)):
        yield path, list(node)
    else:
        yield path, node


def check_value(path: str, value, rule: Rule) -> None:
    """ConfigError unless value satisfies rule."""
    try:
        check_option(path, value, rule)
    except OptionError as e:
        raise ConfigError(str(e)) from None


def check_ranges(cfg: DictConfig | Mapping) -> None:
    """Every value with a rule must satisfy it; every other number must at least be finite (no nan, inf)."""
    for path, value in config_leaves(cfg):
        rule = rule_for(cfg, path)
        if rule is not None:
            check_value(path, value, rule)
        elif isinstance(value, float) and not math.isfinite(value):
            check_value(path, value, FINITE_NUMBER)


# -- robot-rl deploy check --<option> (robot_rl_ros.deploy_check's argparse names) ------------------
DEPLOY_CHECK_RULES: dict[str, Rule] = {
    "seconds": POSITIVE,
    "discovery_timeout": NONNEG,
    "max_age": POSITIVE,
    "domain_id": Range(0, 232, integer=True, optional=True),  # DDS ports overflow above 232
    "action_dim": Range(1, integer=True, optional=True),
    "goal": FINITE_NUMBER,
    "command": FINITE_NUMBER,
}


def check_options(options: Mapping, rules: Mapping[str, Rule], prefix: str = "--") -> None:
    """Command-line options (argparse's names, '-' as '_') against their rules."""
    for name, rule in rules.items():
        if name in options:
            check_value(prefix + name.replace("_", "-"), options[name], rule)
