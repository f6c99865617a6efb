"""A SITL result written out in full for an assertion message.

pytest shortens a message that is not a string to 240 characters, which cut the node log tails and
policy counters out of a CI failure; as a string it is printed whole.
"""

from __future__ import annotations

import json


def sitl_report(r: dict, max_events: int = 30) -> str:
    head = {k: v for k, v in r.items() if k not in ("log_tails", "interventions")}
    events = list(r.get("interventions", []))
    lines = [json.dumps(head, indent=1, default=str)]
    if events:
        lines.append(f"--- safety interventions (last {min(len(events), max_events)} of {len(events)}) ---")
        lines += [str(e) for e in events[-max_events:]]
    for name, tail in (r.get("log_tails") or {}).items():
        lines.append(f"--- {name} log (end) ---\n{tail}")
    return "\n".join(lines)
