"""Policy node latency over real DDS at the bundle rate (100 Hz): compute latency (callback entry to
publish) p50/p99 and period jitter, reported separately; a deadline is missed when a period exceeds
1.5x nominal (goal: p99 compute <= 1 ms, 0 missed).

    source ros_nodes/env.sh && python bench/policy_node_latency.py [BUNDLE] [--seconds 60]

The robot's state is played by a second process-local node at 100 Hz. Without a bundle argument
the PD test bundle from tests/ros_nodes is written to a temporary folder and used.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "ros_nodes"), str(ROOT), str(ROOT / "tests" / "ros_nodes")]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("bundle", nargs="?")
    ap.add_argument("--seconds", type=float, default=60.0)
    args = ap.parse_args()
    from robot_rl_ros.rosenv import apply_local_dds

    domain = apply_local_dds()
    import numpy as np
    import rclpy
    from rclpy.context import Context
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.parameter import Parameter
    from robot_rl_ros.policy_node import PolicyNode

    bundle = args.bundle
    if bundle is None:
        from conftest import write_pd_bundle

        bundle = str(write_pd_bundle(Path(tempfile.mkdtemp()) / "pd"))
    from harness import Harness

    h = Harness(domain)  # publishes odom at 100 Hz in its own context and thread
    ctx = Context()
    rclpy.init(context=ctx, domain_id=domain)
    node = PolicyNode(context=ctx, namespace="/cf1", parameter_overrides=[Parameter("bundle", value=bundle)])
    ex = SingleThreadedExecutor(context=ctx)
    ex.add_node(node)
    stop = threading.Event()
    threading.Timer(args.seconds, stop.set).start()
    while not stop.is_set():
        ex.spin_once(timeout_sec=0.05)
    summary = node.stats.summary()
    summary.update(
        seconds=args.seconds,
        published=node.published,
        skipped=node.skipped,
        rate_hz=node.bundle.control_rate_hz,
        ratio_p99_latency_to_period=summary.get("latency_p99_ms", np.nan) / (1e3 / node.bundle.control_rate_hz),
    )
    print(json.dumps(summary, indent=1))
    ex.shutdown()
    node.destroy_node()
    ctx.try_shutdown()
    h.close()
    time.sleep(0.1)


if __name__ == "__main__":
    main()
