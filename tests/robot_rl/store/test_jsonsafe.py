"""json_safe: what the store's JSON columns and the dashboard's answers are made of."""

from __future__ import annotations

import json
import math

from robot_rl.store.jsonsafe import json_safe


def test_non_finite_floats_become_null() -> None:
    assert json_safe({"a": math.nan, "b": [math.inf, -math.inf, 1.5], "c": (0.0, True, None, 3, "x")}) == {
        "a": None,
        "b": [None, None, 1.5],
        "c": [0.0, True, None, 3, "x"],
    }


def test_keys_and_unknown_objects_become_text() -> None:
    out = json_safe({1: {"s": {2}}, None: b"raw"})
    assert out == {"1": {"s": "{2}"}, "None": "b'raw'"}
    json.dumps(out, allow_nan=False)
