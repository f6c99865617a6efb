"""The config schema covers every numeric option, every default is in range, and the ranges bite; Hydra refuses
wrong types and keys from the structured configs."""

from __future__ import annotations

import dataclasses

import pytest

from robot_conventions.options import Range
from robot_rl.config import CONFIG_DIR, ConfigError, load_config
from robot_rl.schema import check_ranges, rule_for
from robot_rl.training.imitation import DaggerConfig
from sim.tasks import TASKS


def _groups(name: str) -> list[str]:
    return sorted(p.stem for p in (CONFIG_DIR / name).glob("*.yaml"))


def _numeric_leaves(node, path=""):
    from omegaconf import DictConfig, ListConfig

    if isinstance(node, DictConfig):
        for k in node:
            yield from _numeric_leaves(node[k], f"{path}.{k}" if path else str(k))
    elif isinstance(node, ListConfig):
        if any(isinstance(v, (int, float)) and not isinstance(v, bool) for v in node):
            yield path
    elif isinstance(node, (int, float)) and not isinstance(node, bool):
        yield path


# each option of each group once (a group's values do not depend on the others' choices)
GROUP_CHOICES = [f"{group}={option}" for group in ("task", "algo", "guidance") for option in _groups(group)]


@pytest.mark.parametrize("choice", GROUP_CHOICES)
def test_every_numeric_config_value_has_a_rule_and_its_default_obeys_it(choice):
    cfg = load_config([choice])  # check_ranges runs in here: the defaults are in range
    assert [p for p in _numeric_leaves(cfg) if rule_for(cfg, p) is None] == []


def _numeric_fields(cls, prefix=""):
    for f in dataclasses.fields(cls):
        default = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
        if dataclasses.is_dataclass(default):
            yield from _numeric_fields(type(default), f"{prefix}{f.name}.")
        elif any(t in str(f.type) for t in ("int", "float")):
            yield prefix + f.name, default


@pytest.mark.parametrize("task", sorted(TASKS))
def test_every_numeric_task_option_has_a_rule_and_its_default_obeys_it(task):
    for name, default in _numeric_fields(TASKS[task]):
        section = {"task": {"name": task, "params": {}}}
        assert rule_for(section, f"task.params.{name}") is not None, f"{task}: task.params.{name} has no range"
        section["task"]["params"] = {name: list(default) if isinstance(default, tuple) else default}
        check_ranges(section)


def test_every_imitation_option_has_a_rule_and_its_default_obeys_it():
    numeric = [f.name for f in dataclasses.fields(DaggerConfig) if f.type in ("int", "float")]
    assert [n for n in numeric if rule_for({"imitation": {}}, f"imitation.{n}") is None] == []
    check_ranges({"imitation": dataclasses.asdict(DaggerConfig())})


@pytest.mark.parametrize(
    "override, message",
    [
        ("task.num_worlds=0", "task.num_worlds=0 is out of range: allowed an integer in [1, 1048576]"),
        ("task.episode_length_s=-1.5", "task.episode_length_s=-1.5 is out of range: allowed a number > 0"),
        ("train.iterations=-1", "train.iterations=-1 is out of range: allowed an integer >= 0"),
        ("train.save_every=0", "train.save_every=0 is out of range: allowed an integer >= 1"),
        ("algo.lam=1.01", "algo.lam=1.01 is out of range: allowed a number in [0, 1]"),
        ("algo.learning_rate=0", "algo.learning_rate=0 is out of range: allowed a number > 0"),
        ("seed=-3", "seed=-3 is out of range: allowed an integer in [0, 4294967295]"),
        ("eval.seed=-1", "eval.seed=-1 is out of range: allowed an integer in [0, 4294967295]"),
        ("play.seconds=inf", "play.seconds=inf is out of range: allowed a number > 0"),
        ("+task.params.rewards.crash=nan", "task.params.rewards.crash=nan is out of range: allowed a finite number"),
        ("task.params.ground_start_prob=1.2", "ground_start_prob=1.2 is out of range: allowed a number in [0, 1]"),
    ],
)
def test_out_of_range_values_name_the_key_value_and_range(override, message):
    with pytest.raises(ConfigError) as e:
        load_config([override])
    assert message in str(e.value)


def test_ranges_of_the_other_groups():
    swarm = ["task=crazyflie_swarm", "algo=ppo_swarm"]
    with pytest.raises(ConfigError, match=r"task.params.speed_range=\[0.7, 0.3\].*increasing order"):
        load_config([*swarm, "+task.params.speed_range=[0.7,0.3]"])
    with pytest.raises(ConfigError, match="algo.update_threads=0"):
        load_config([*swarm, "algo.update_threads=0"])
    with pytest.raises(ConfigError, match=r"guidance.approach_gain=0 .* \(0, 1\]"):
        load_config(["task=arm_push", "guidance=plan", "guidance.approach_gain=0"])
    with pytest.raises(ConfigError, match="guidance.model.timeout_s=-1"):
        load_config(["task=arm_push", "guidance=keypoint", "guidance.model.timeout_s=-1"])
    with pytest.raises(ConfigError, match="task.params.ik.max_pos_step=0"):
        load_config(["task=arm_reach", "+task.params.ik.max_pos_step=0"])
    cfg = load_config([*swarm, "algo.swarm_hidden=8", "+task.params.rewards.goal_progress=1.0"])  # in range
    assert cfg.algo.swarm_hidden == 8 and cfg.task.params.rewards.goal_progress == 1.0


def test_added_keys_must_be_options():
    with pytest.raises(ConfigError, match=r"unknown option 'task.params.succes_radius' .*success_radius"):
        load_config(["+task.params.succes_radius=0.2"])
    with pytest.raises(ConfigError, match="unknown config key 'train.iteration'"):
        load_config(["+train.iteration=3"])
    with pytest.raises(ConfigError, match="task.params.max_start_speed: expected float, got 'fast'"):
        load_config(["+task.params.max_start_speed=fast"])
    with pytest.raises(ConfigError, match="task.params.curriculum_iterations: expected int, got 2.5"):
        load_config(["+task.params.curriculum_iterations=2.5"])
    assert load_config(["+algo.per_drone=true"]).algo.per_drone is True  # ppo_swarm's option, read with a default
    assert load_config(["+task.params.success_radius=0.2"]).task.params.success_radius == 0.2


def test_range_edges():
    assert Range(0, 1).accepts(0) and Range(0, 1).accepts(1) and not Range(0, 1).accepts(1.0001)
    assert not Range(0, lo_open=True).accepts(0) and Range(0, lo_open=True).accepts(1e-9)
    assert not Range(1, integer=True).accepts(2.0) and not Range().accepts(True) and not Range().accepts(float("nan"))


@pytest.mark.parametrize("choice", GROUP_CHOICES)
def test_every_group_option_is_typed_by_its_dataclass(choice):
    """configs/<group>/<option>.yaml only overrides its schema: the composed node is the dataclass, with every
    one of its fields (a task option the YAML leaves out has the task dataclass's default)."""
    from omegaconf import OmegaConf

    from robot_rl.schema import option_schema

    group, name = choice.split("=")
    node = load_config([choice])[group]
    schema = option_schema(group, name)
    assert OmegaConf.get_type(node) is schema
    assert list(node.keys()) == [f.name for f in dataclasses.fields(schema)]
    if group == "task":
        defaults = {f.name: f for f in dataclasses.fields(TASKS[name])}
        assert set(node.params.keys()) == set(defaults) - {"action_mode"}


def test_hydra_refuses_wrong_types_from_the_schema():
    with pytest.raises(ConfigError, match=r"algo.actor_hidden_dims\[0\]: expected int, got 'a'"):
        load_config(["algo.actor_hidden_dims=[a]"])
    with pytest.raises(ConfigError, match="task.params.kp: expected float, got 'stiff'"):
        load_config(["task=quadruped_velocity", "task.params.kp=stiff"])
    with pytest.raises(ConfigError, match="unknown config key 'eval.episode'"):
        load_config(["eval.episode=3"])
    assert load_config(["task=quadruped_velocity", "task.params.kp=null"]).task.params.kp is None
