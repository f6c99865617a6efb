"""JSON-safe copies of values for the store's JSON columns and the dashboard's responses."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any


def json_safe(obj: Any) -> Any:
    """JSON-safe copy: NaN/inf become None (browsers' JSON.parse rejects them), keys become
    strings, tuples lists, and anything JSON has no type for its ``str()``."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, Mapping):
        return {str(k): json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [json_safe(v) for v in obj]
    if obj is None or isinstance(obj, (str, int, bool)):
        return obj
    return str(obj)
