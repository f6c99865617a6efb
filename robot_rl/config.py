"""Hydra config composition over the structured schemas of robot_rl.schema, behind our own CLI front, so
bad input is one line and exit code 2."""

from __future__ import annotations

import dataclasses
import functools
import itertools
import re

from omegaconf import DictConfig, OmegaConf

from robot_rl.schema import CONFIG_DIR, ConfigError, check_ranges, register_schemas

__all__ = ["CONFIG_DIR", "ConfigError", "expand_sweep", "load_config", "to_yaml"]


def _groups() -> dict[str, list[str]]:
    return {d.name: sorted(p.stem for p in d.glob("*.yaml")) for d in sorted(CONFIG_DIR.iterdir()) if d.is_dir()}


def _compose(overrides: list[str]) -> DictConfig:
    from hydra import compose, initialize_config_dir
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    register_schemas()
    try:
        with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base=None):
            return compose(config_name="config", overrides=overrides)
    except (HydraException, OmegaConfBaseException) as e:
        raise ConfigError(_one_line(e)) from None


def _one_line(e: Exception) -> str:
    """Hydra's and OmegaConf's refusal as the line we print: the key, what it expects, what it got."""
    from omegaconf.errors import ConfigAttributeError, ConfigKeyError, ValidationError

    cause = e if isinstance(e, ValidationError | ConfigKeyError) else e.__cause__
    key = getattr(cause, "full_key", None)
    if isinstance(cause, ValidationError) and key:
        m = re.search(r"Value '(.*)' of type '(\w+)' could not be converted to (\w+)", str(cause))
        if m:
            got = repr(m.group(1)) if m.group(2) == "str" else m.group(1)
            return f"{key}: expected {_TYPE_NAMES.get(m.group(3), m.group(3))}, got {got}"
        return f"{key}: {' '.join(str(cause).split()[:12])}"
    if isinstance(cause, ConfigAttributeError | ConfigKeyError) and key:
        return f"unknown config key '{key}' (check the spelling; '+' adds only existing options)"
    msg = " ".join(str(e).split()).split(" Config search path")[0]
    for group, options in _groups().items():
        if f"'{group}'" in msg or f"{group}=" in msg:
            msg += f" (available {group} options: {', '.join(options)})"
            break
    return msg


_TYPE_NAMES = {"Integer": "int", "Float": "float", "Boolean": "bool", "String": "str"}


def _check_keys(node: DictConfig, task: str, path: str = "") -> None:
    """Every key is a field of its node's schema (Hydra lets '+key=value' add keys to structured nodes)."""
    schema = OmegaConf.get_type(node)
    if dataclasses.is_dataclass(schema):
        fields = [f.name for f in dataclasses.fields(schema)]
        for key in node:
            if key not in fields:
                dotted = f"{path}.{key}" if path else str(key)
                if dotted.startswith("task.params."):
                    msg = f"unknown option '{dotted}' for task {task} (available: {', '.join(fields)})"
                    raise ConfigError(msg)
                raise ConfigError(f"unknown config key '{dotted}' (check the spelling; '+' adds only existing options)")
    for key in node:
        child = node._get_node(key)
        if isinstance(child, DictConfig) and not child._is_missing() and not child._is_none():
            _check_keys(child, task, f"{path}.{key}" if path else str(key))


@functools.lru_cache(maxsize=32)
def _defaults(choices: tuple[str, ...]) -> DictConfig:
    """The composition of the group choices alone (read only; cached: sweeps and tests compose it often)."""
    return _compose(list(choices))


def load_config(overrides: list[str]) -> DictConfig:
    """The composed config, refused with one line unless every key is an option of its schema and every
    value has the option's type and is in its range."""
    base = _defaults(tuple(o for o in overrides if o.split("=", 1)[0] in _groups()))
    # '+key=value' for a key the schema already has is a plain override (the schema lists every option)
    overrides = [_plain_if_present(o, base) for o in overrides]
    cfg = _compose(overrides)
    _check_keys(cfg, str(cfg.task.name))
    check_ranges(cfg)
    _check_backend_device(cfg.backend)
    return cfg


def _check_backend_device(backend: DictConfig) -> None:
    """backend.device is one this backend steps on and torch can use here (before a run directory exists)."""
    device = str(backend.get("device", "cpu"))
    if device == "cpu":
        return
    if backend.name == "mujoco":
        raise ConfigError(
            f"backend.device={device}: backend=mujoco steps on the CPU (GPU physics: backend=mjwarp "
            f"backend.device={device})"
        )
    from robot_rl.devices import unavailable  # torch, only for a device other than the CPU

    if why := unavailable(device):
        raise ConfigError(f"backend.device={device}: {why}")


def _plain_if_present(override: str, base: DictConfig) -> str:
    if override.startswith("+") and not override.startswith("++") and "=" in override:
        key = override[1:].split("=", 1)[0]
        if OmegaConf.select(base, key, default=_ABSENT) is not _ABSENT:
            return override[1:]
    return override


_ABSENT = object()


def expand_sweep(overrides: list[str]) -> list[list[str]]:
    """'-m' multirun: 'seed=0,1,2 task=a,b' -> the cartesian product of single-valued override lists."""
    axes = []
    for o in overrides:
        if "=" in o and "," in o.split("=", 1)[1] and not o.split("=", 1)[1].startswith("["):
            key, values = o.split("=", 1)
            axes.append([f"{key}={v}" for v in values.split(",")])
        else:
            axes.append([o])
    return [list(c) for c in itertools.product(*axes)]


def to_yaml(cfg: DictConfig) -> str:
    return OmegaConf.to_yaml(cfg, resolve=True)
