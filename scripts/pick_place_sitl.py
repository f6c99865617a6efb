"""A plan-guided pick-and-place bundle through the ROS 2 nodes, on every layout of its pool (issue 18, acceptance 6).

    python scripts/pick_place_sitl.py --bundle runs/<plan run>/bundle --out runs/sweeps/pick_place_sitl

Each layout is one lock-step SITL run (robot_rl_ros.sitl.pick_place): the arm sim bridge shows the layout and
reports the object's pose and the goal as perception would, the policy node's runtime follows the bundle's plan
for that layout, the arm safety node supervises. The pool must be the run's: --layouts and --layout-seed are its
task.params (defaults: the run's 16 layouts, seed 0). Writes <out>/sitl.json and prints one line per layout.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bundle", required=True, type=Path)
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--layouts", type=int, default=16)
    ap.add_argument("--layout-seed", type=int, default=0)
    ap.add_argument("--seconds", type=float, default=8.0)
    args = ap.parse_args()

    from robot_rl_ros.rosenv import apply_local_dds
    from robot_rl_ros.sitl import pick_place

    apply_local_dds()
    rows = []
    for layout in range(args.layouts):
        sim = {"layouts": args.layouts, "layout_seed": args.layout_seed}
        r = pick_place(str(args.bundle), layout=layout, seconds=args.seconds, sim=sim)
        row = {k: r[k] for k in ("in_goal", "first_in_goal_s", "object_start", "object_final", "goal", "mode")}
        rows.append({"layout": layout, **row, "finished": r["finished"]})
        first = "never" if r["first_in_goal_s"] is None else f"first at {r['first_in_goal_s']:.2f} s"
        print(f"layout {layout:2d}: in the bowl {r['in_goal']} ({first}), mode {r['mode']}")
    done = sum(r["in_goal"] for r in rows)
    print(f"{done} of {len(rows)} layouts end with the object in its bowl")
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "sitl.json").write_text(json.dumps({"bundle": str(args.bundle), "layouts": rows}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
