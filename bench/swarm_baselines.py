"""Classical planners on held-out clutter scenes (issue 8): plain go-to, potential fields, CBF filter.

    .venv/bin/python bench/swarm_baselines.py --scenes 100 --tune      # the acceptance table
    .venv/bin/python bench/swarm_baselines.py --scenes 8               # a quick look

--tune first sweeps each planner's main gain on training scenes (never the held-out ones) and keeps
the best success rate; the sweep and the choice are printed with the table.
Every scene is flown by all drones at once, one episode each; metrics are per drone (see
robot_rl.baselines.swarm_planners). Seeds change the planner speeds drawn per drone, not the scenes.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys

import torch

from robot_rl.baselines.swarm_planners import (
    CbfPlanner,
    GotoPlanner,
    PotentialFieldPlanner,
    evaluate,
    format_table,
)
from sim.robots.goto_planner import CbfParams

SWEEPS = {  # planner -> (parameter, values, constructor)
    "apf": ("k_obstacle", [0.1, 0.3, 1.0], lambda v: PotentialFieldPlanner(k_obstacle=v, k_neighbour=v)),
    "cbf": ("k0", [2.0, 4.0, 8.0], lambda v: CbfPlanner(cbf=dataclasses.replace(CbfParams(), k0=v, k1=v))),
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scenes", type=int, default=8)
    ap.add_argument("--seeds", type=int, default=1)
    ap.add_argument("--drones", type=int, default=6)
    ap.add_argument("--density", type=float, default=0.2)
    ap.add_argument("--episode-s", type=float, default=20.0)
    ap.add_argument("--tune", action="store_true")
    ap.add_argument("--tune-scenes", type=int, default=8)
    ap.add_argument("--nthread", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(1)
    common = dict(num_drones=args.drones, density=args.density, episode_s=args.episode_s, nthread=args.nthread)
    planners = {"goto": GotoPlanner(), "apf": PotentialFieldPlanner(), "cbf": CbfPlanner()}
    if args.tune:
        for name, (param, values, make) in SWEEPS.items():
            scores = {v: evaluate(make(v), args.tune_scenes, scene_set="train", seed=123, **common) for v in values}
            best = max(values, key=lambda v: (scores[v]["success"], -scores[v]["collision"]))
            print(f"tune {name}.{param}: " + ", ".join(
                f"{v}: success {s['success']:.3f} collision {s['collision']:.3f}" for v, s in scores.items()
            ) + f" -> {best}")  # fmt: skip
            planners[name] = make(best)
    rows = {}
    for name, planner in planners.items():
        runs = [evaluate(planner, args.scenes, seed=s, scene_set="test", **common) for s in range(args.seeds)]
        rows[name] = {k: sum(r[k] for r in runs) / len(runs) for k in runs[0]}
    print(f"command: {' '.join(sys.argv)}")
    print(f"{args.scenes} held-out scenes x {args.seeds} seeds, {args.drones} drones, density {args.density}")
    print(format_table(rows))
    speed = sum(r["drone_steps_per_s"] for r in rows.values()) / len(rows)
    print(f"simulation: {speed:.0f} drone control steps/s (with planner, ToF and metrics)")


if __name__ == "__main__":
    main()
