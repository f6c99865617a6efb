"""Hydra config composition behind our own CLI front, so bad input is one line and exit code 2."""

from __future__ import annotations

import functools
import itertools

from omegaconf import DictConfig, ListConfig, OmegaConf

from robot_rl.schema import CONFIG_DIR, ConfigError, check_added_keys, check_ranges

__all__ = ["CONFIG_DIR", "ConfigError", "expand_sweep", "load_config", "to_yaml"]


def _groups() -> dict[str, list[str]]:
    return {d.name: sorted(p.stem for p in d.glob("*.yaml")) for d in sorted(CONFIG_DIR.iterdir()) if d.is_dir()}


def _compose(overrides: list[str]) -> DictConfig:
    from hydra import compose, initialize_config_dir
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    try:
        with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base=None):
            return compose(config_name="config", overrides=overrides)
    except (HydraException, OmegaConfBaseException) as e:
        msg = " ".join(str(e).split())
        for group, options in _groups().items():
            if f"'{group}'" in msg or f"{group}=" in msg:
                msg += f" (available {group} options: {', '.join(options)})"
                break
        raise ConfigError(msg) from None


def _check_types(cfg, base, path: str = "") -> None:
    """Overrides must keep the type of the default they replace (an int stays an int, ...)."""
    if isinstance(base, DictConfig):
        if not isinstance(cfg, DictConfig):
            raise ConfigError(f"{path}: expected a mapping, got {cfg!r}")
        for key in base:
            if key in cfg:
                _check_types(cfg[key], base[key], f"{path}.{key}" if path else str(key))
        return
    if isinstance(base, ListConfig) or base is None:
        return
    expected = type(base)
    ok = isinstance(cfg, expected) or (expected is float and isinstance(cfg, int) and not isinstance(cfg, bool))
    if expected is int and isinstance(cfg, bool):
        ok = False
    if not ok:
        raise ConfigError(f"{path}: expected {expected.__name__}, got {cfg!r}")


@functools.lru_cache(maxsize=32)
def _defaults(choices: tuple[str, ...]) -> DictConfig:
    """The composition of the group choices alone (read only; cached: sweeps and tests compose it often)."""
    return _compose(list(choices))


def load_config(overrides: list[str]) -> DictConfig:
    """The composed config, refused with one line unless every value has its default's type and is in range."""
    cfg = _compose(overrides)
    # Compare with the same group choices but no value overrides: catches 'train.iterations=abc'.
    base = _defaults(tuple(o for o in overrides if o.split("=", 1)[0] in _groups()))
    _check_types(cfg, base)
    check_added_keys(cfg, base)
    check_ranges(cfg)
    return cfg


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
