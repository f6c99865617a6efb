"""Leaderboard serve time with 1,000 runs and 100,000 episode records (goal: < 0.3 s).

Fills a temporary SQLite store (5 tasks x 4 rewards x 5 guidance methods x 10 seeds; two
evaluations of 50 episodes per run), starts the dashboard on a loopback port and times complete
HTTP GETs of the leaderboard JSON (what the page fetches), unfiltered and filtered.

    python bench/dashboard_leaderboard.py [--runs 1000] [--episodes 100000] [--repeats 20]
"""

from __future__ import annotations

import argparse
import http.client
import random
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

from robot_rl.dashboard.server import make_server
from robot_rl.store import Store

TASKS = ["crazyflie_hover", "crazyflie_track", "franka_lift", "go2_walk", "ur5_reach"]
REWARDS = ["dense", "sparse", "keypoint", "shaped"]
GUIDANCE = ["none", "vlm_keypoints", "llm_plan", "oracle", "vlm_llm"]


def fill(store: Store, runs: int, episodes: int, rng: random.Random) -> None:
    per_eval = max(1, episodes // (2 * runs))
    for i in range(runs):
        task, reward, guidance = TASKS[i % 5], REWARDS[(i // 5) % 4], GUIDANCE[(i // 20) % 5]
        name = f"{task}_{reward}_{guidance}_s{i // 100}_{i}"
        store.record_run(
            name,
            task=task,
            algo="ppo",
            reward=reward,
            guidance=guidance,
            seed=i // 100,
            status="finished",
            git_revision="bench",
            versions={"torch": "2.13.0"},
            config_yaml=f"task:\n  name: {task}\nseed: {i // 100}\n",
        )
        for j, rz in enumerate(("none", "train")):
            p = rng.random()
            store.record_evaluation(
                name,
                {
                    "name": f"final_{rz}",
                    "task": task,
                    "episodes": per_eval,
                    "randomization": rz,
                    "seed": j,
                    "metrics": {"success_rate": p, "position_error_m": rng.random() * 0.1, "crash_rate": 0.0},
                    "reward_terms": {"position": 1.0, "action_rate": -0.1},
                    "per_episode": [
                        {
                            "episode": e,
                            "success": rng.random() < p,
                            "return": rng.gauss(10, 2),
                            "position_error_m": rng.random() * 0.1,
                            "crashed": False,
                        }
                        for e in range(per_eval)
                    ],
                },
                created_at=1.0e9 + 2 * i + j,
            )


def timed_get(host: str, port: int, path: str) -> tuple[float, int]:
    start = time.perf_counter()
    conn = http.client.HTTPConnection(host, port, timeout=30)
    conn.request("GET", path)
    resp = conn.getresponse()
    body = resp.read()
    conn.close()
    assert resp.status == 200, (resp.status, body[:200])
    return time.perf_counter() - start, len(body)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=1000)
    ap.add_argument("--episodes", type=int, default=100_000)
    ap.add_argument("--repeats", type=int, default=20)
    args = ap.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="dash-bench-") as tmp:
        root = Path(tmp)
        store = Store(root / "eval_store.sqlite")
        t0 = time.perf_counter()
        fill(store, args.runs, args.episodes, random.Random(0))
        fill_s = time.perf_counter() - t0
        counts = store.counts()
        store.close()
        print(
            f"store: {counts['runs']} runs, {counts['evaluations']} evaluations, "
            f"{counts['episodes']} episode records (filled in {fill_s:.1f} s)"
        )

        server = make_server(root, port=0, rescan_interval_s=0)
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        host, port = server.server_address[:2]
        try:
            timed_get(host, port, "/api/leaderboard")  # first query warms SQLite's page cache
            results = {}
            for label, path in [
                ("leaderboard (all runs)", "/api/leaderboard"),
                ("leaderboard (task filter)", "/api/leaderboard?task=franka_lift"),
                ("page html", "/"),
            ]:
                times, size = [], 0
                for _ in range(args.repeats):
                    dt, size = timed_get(host, port, path)
                    times.append(dt)
                results[label] = times
                print(
                    f"{label:28s} median {statistics.median(times) * 1e3:7.1f} ms  "
                    f"max {max(times) * 1e3:7.1f} ms  ({size / 1024:.0f} KiB)"
                )
        finally:
            server.shutdown()
            server.server_close()
            thread.join(5)

    median = statistics.median(results["leaderboard (all runs)"])
    verdict = "OK" if median < 0.3 else "TOO SLOW"
    print(f"leaderboard serve time: {median:.3f} s (goal < 0.3 s): {verdict}")
    return 0 if median < 0.3 else 1


if __name__ == "__main__":
    sys.exit(main())
