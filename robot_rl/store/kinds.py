"""Which kind an evaluation is, so a run's headline is its standard evaluation and never the most recent one.

- standard: the trained checkpoint on the fixed evaluation seeds under the training randomization, with the
  training's sensing (observation noise and latency on, pushes off; `robot-rl eval` defaults). The
  leaderboard's headline and its seed groups use only these.
- stress: the checkpoint under other conditions (randomization=max or none, pushes, no noise); shown under
  the leaderboard's randomization filter.
- bundle: the exported ONNX bundle through the deploy runtime (`eval bundle=true`).
- zero: zero actions instead of the policy (`policy=zero`, `policy=corrected_plan`: the plan alone).
- sitl: a flight in software in the loop (`robot-rl sitl`, the demo's eval/sitl.json).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

KINDS = ("standard", "stress", "bundle", "zero", "sitl")
STANDARD_SENSING = {"obs_noise": True, "action_latency": True, "pushes": False}


def evaluation_kind(ev: Mapping[str, Any]) -> str:
    """The kind of a (validated) evaluation record; records from before kinds were written are judged by the
    fields they have (`policy`, `randomization`, a SITL flight's `transport`)."""
    name = str(ev.get("name") or "")
    if "transport" in ev or name.startswith("sitl"):
        return "sitl"
    policy = ev.get("policy")
    if policy == "zero":
        return "zero"
    if policy == "onnx":
        return "bundle"
    sensing = ev.get("conditions")
    sensing = sensing if isinstance(sensing, Mapping) else {}
    standard = ev.get("randomization") in (None, "train") and all(
        sensing.get(k, v) == v for k, v in STANDARD_SENSING.items()
    )
    return "standard" if standard else "stress"
