"""What a valid option value is: ranges and choices, written beside each config dataclass field.

A config dataclass (a task's options, the learner's, guidance's) is the one schema of its options:
Hydra types and keys come from its fields, and the allowed values from `option(default, RULE)` in the
field's metadata, so `robot-rl train task.num_worlds=0` is refused with one line naming the key, the
value and the range, and `robot-rl <verb> --help` lists the same ranges.

    @dataclass
    class HoverOptions:
        success_radius: float = option(0.1, POSITIVE)
        rewards: RewardWeights = option(factory=RewardWeights, rule=FINITE)  # every weight below it

A rule on a dataclass-typed field covers the numbers below it that have none of their own.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

RULE_KEY = "rule"  # the field metadata key
SEED_MAX = 2**32 - 1  # numpy's seed range


class OptionError(ValueError):
    """A value outside its option's rule; the message names the key, the value and what is allowed."""


def _num(x: float | None) -> str:
    return "" if x is None else str(int(x)) if float(x).is_integer() else f"{x:g}"


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
# a torch/warp device the GPU backend and the learners accept
DEVICE = Choice(("cpu", "cuda", *(f"cuda:{i}" for i in range(16))))


def option(default: Any = dataclasses.MISSING, rule: Rule | None = None, *, factory: Any = dataclasses.MISSING):
    """A dataclass field whose allowed values are `rule` (a list or tuple default is copied per instance)."""
    metadata = {RULE_KEY: rule} if rule is not None else {}
    if isinstance(default, list):
        items = tuple(default)
        return dataclasses.field(default_factory=lambda: list(items), metadata=metadata)
    return dataclasses.field(default=default, default_factory=factory, metadata=metadata)


def rule_of(f: dataclasses.Field) -> Rule | None:
    """The rule written beside a field, or None."""
    return f.metadata.get(RULE_KEY)


def _shown(value):
    """A value as the user wrote it: the schema stores 0 for a float option as 0.0."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return [_shown(v) for v in value] if isinstance(value, (list, tuple)) else value


def check_option(path: str, value, rule: Rule) -> None:
    """OptionError, naming path, the value and what is allowed, unless value satisfies rule."""
    if value is None:
        if not rule.optional:
            raise OptionError(f"{path}=null is out of range: allowed {rule.allowed()}")
        return
    if isinstance(rule, Choice):
        if value not in rule.values:
            raise OptionError(f"{path}={value!r} is not allowed: {rule.allowed()}")
        return
    values = list(value) if isinstance(value, Sequence) and not isinstance(value, str) else [value]
    bad = not values if isinstance(value, (list, tuple)) else False
    bad = bad or not all(rule.accepts(v) for v in values)
    bad = bad or (rule.ordered and any(a > b for a, b in zip(values[:-1], values[1:], strict=True)))
    if bad:
        raise OptionError(f"{path}={_shown(value)!r} is out of range: allowed {rule.allowed()}")
