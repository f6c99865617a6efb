"""Leaderboard serve time with 10,000 runs (goal: median < 100 ms per page).

Writes N run directories in the layout ``robot-rl train/eval`` leaves (resolved config.yaml,
meta.json, two eval/*.json with per-episode rows; 5 tasks x 4 rewards x 5 guidance methods x
N/100 seeds), lets the dashboard index them as it does at start-up, and times complete HTTP GETs
of what the page fetches: the first page of the leaderboard JSON, the last page, filtered pages
and the page itself. The server's re-indexer runs at its default interval meanwhile, as it does
in use. The reference is ``/api/health`` on the same server, timed in the same alternating loop:
the floor of one request on this machine; ratios are against it.

    python bench/dashboard_leaderboard.py [--runs 10000] [--episodes 100000] [--repeats 30]
"""

from __future__ import annotations

import argparse
import http.client
import json
import random
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

from robot_rl.dashboard.server import make_server
from robot_rl.store import Store, index_runs_root

TASKS = ["crazyflie_hover", "crazyflie_track", "franka_lift", "go2_walk", "ur5_reach"]
REWARDS = ["dense", "sparse", "keypoint", "shaped"]
GUIDANCE = ["none", "vlm_keypoints", "llm_plan", "oracle", "vlm_llm"]
GOAL_S = 0.100

# About the size of a resolved config.yaml that robot-rl train writes (1 KB).
CONFIG = """task:
  name: {task}
  num_worlds: 4096
  episode_length_s: 8.0
  randomization: train
  obs_noise: true
  action_latency: true
  pushes: true
  params:
    ground_start_prob: 0.25
    start_half_extent: 1.0
    firmware_impl: native
algo:
  name: ppo
  num_steps_per_env: 24
  num_learning_epochs: 5
  num_mini_batches: 4
  learning_rate: 0.001
  schedule: adaptive
  desired_kl: 0.01
  gamma: 0.99
  lam: 0.95
  entropy_coef: 0.0
  clip_param: 0.2
  max_grad_norm: 1.0
  init_std: 0.5
  activation: elu
  actor_hidden_dims: [64, 64]
  critic_hidden_dims: [128, 128]
reward:
  name: {reward}
guidance:
  name: {guidance}
backend:
  name: mujoco
train:
  iterations: 300
  save_every: 50
eval:
  episodes: 1024
  seed: 0
seed: {seed}
runs_root: runs
"""


def write_runs(root: Path, runs: int, episodes: int, rng: random.Random) -> None:
    per_eval = max(1, episodes // (2 * runs))
    for i in range(runs):
        task, reward, guidance = TASKS[i % 5], REWARDS[(i // 5) % 4], GUIDANCE[(i // 20) % 5]
        seed = i // 100
        name = f"{task}_{reward}_{guidance}_s{seed}_{i}"
        run = root / name
        (run / "eval").mkdir(parents=True)
        (run / "config.yaml").write_text(CONFIG.format(task=task, reward=reward, guidance=guidance, seed=seed))
        meta = {
            "run_name": name,
            "task": task,
            "algo": "ppo",
            "reward": reward,
            "guidance": guidance,
            "seed": seed,
            "status": "finished",
            "git_revision": "bench",
            "versions": {"torch": "2.13.0", "mujoco": "3.3.0", "rsl-rl-lib": "3.0.1", "numpy": "2.2.0"},
            "started_at": "2026-01-01T00:00:00+00:00",
            "finished_at": "2026-01-01T00:04:00+00:00",
            "train_wall_time_s": 233.7,
        }
        (run / "meta.json").write_text(json.dumps(meta, indent=2))
        for j, rz in enumerate(("none", "train")):
            p = rng.random()
            ev = {
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
            }
            path = run / "eval" / f"final_{rz}.json"
            path.write_text(json.dumps(ev))


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
    ap.add_argument("--runs", type=int, default=10_000)
    ap.add_argument("--episodes", type=int, default=100_000)
    ap.add_argument("--repeats", type=int, default=30)
    ap.add_argument("--rescan", type=float, default=5.0, help="re-index interval while timing (0: off)")
    args = ap.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="dash-bench-") as tmp:
        root = Path(tmp)
        t0 = time.perf_counter()
        write_runs(root, args.runs, args.episodes, random.Random(0))
        write_s = time.perf_counter() - t0
        with Store(root / "eval_store.sqlite") as store:
            t0 = time.perf_counter()
            index_runs_root(store, root)  # what the dashboard does at start-up on a new store
            index_s = time.perf_counter() - t0
            t0 = time.perf_counter()
            index_runs_root(store, root)  # an unchanged tree: what every re-index pass costs
            rescan_s = time.perf_counter() - t0
            counts = store.counts()
        server = make_server(root, port=0, rescan_interval_s=args.rescan)
        print(
            f"store: {counts['runs']} runs, {counts['evaluations']} evaluations, {counts['episodes']} episode"
            f" records; wrote the run directories in {write_s:.1f} s, first index {index_s:.1f} s,"
            f" a re-index pass over the unchanged tree {rescan_s:.2f} s (every >= {args.rescan:g} s while timing)"
        )

        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        host, port = server.server_address[:2]
        last = max(0, (args.runs - 1) // 50 * 50)
        paths = {
            "/api/health (reference)": "/api/health",
            "leaderboard page 1": "/api/leaderboard",
            # A run is recorded (untimed) before each of these: the store's generation moves, so
            # the cached per-configuration sums are recomputed over all runs.
            "page 1 after a write": "/api/leaderboard",
            "leaderboard last page": f"/api/leaderboard?offset={last}",
            "leaderboard task filter": "/api/leaderboard?task=franka_lift",
            "leaderboard randomization": "/api/leaderboard?randomization=train&offset=500",
            "page html": "/",
        }
        times: dict[str, list[float]] = {k: [] for k in paths}
        sizes: dict[str, int] = {}
        writer = Store(root / "eval_store.sqlite")
        try:
            for p in paths.values():
                timed_get(host, port, p)  # warm SQLite's page cache and the import of each path
            for i in range(args.repeats):  # alternating, so load on the machine hits all alike
                for label, p in paths.items():
                    if label == "page 1 after a write":
                        writer.record_run(f"bench_extra_{i}", task=TASKS[i % 5], algo="ppo", seed=i)
                    dt, sizes[label] = timed_get(host, port, p)
                    times[label].append(dt)
        finally:
            writer.close()
            server.shutdown()
            server.server_close()
            thread.join(5)

    ref = statistics.median(times["/api/health (reference)"])
    print(f"{'':28s}{'median':>10s}{'max':>10s}{'ratio':>8s}{'size':>10s}")
    for label, ts in times.items():
        med = statistics.median(ts)
        print(f"{label:28s}{med * 1e3:8.1f}ms{max(ts) * 1e3:8.1f}ms{med / ref:8.1f}{sizes[label] / 1024:8.1f}KiB")
    median = statistics.median(times["leaderboard page 1"])
    after_write = statistics.median(times["page 1 after a write"])
    ok = median < GOAL_S and after_write < GOAL_S
    print(
        f"leaderboard serve time at {args.runs} runs: median {median * 1e3:.1f} ms (goal < {GOAL_S * 1e3:.0f} ms),"
        f" {median / ref:.1f}x the reference request; right after a write {after_write * 1e3:.1f} ms:"
        f" {'OK' if ok else 'TOO SLOW'}"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
