"""Environment for DDS: keep discovery on this machine and give each run its own domain."""

from __future__ import annotations

import itertools
import os

# Domain ids 0..101 are safe for any participant count with the default port mapping (ROS docs);
# 0 is left to interactive use.
_MAX_DOMAIN = 101


def pick_domain_id(salt: int | None = None) -> int:
    """A domain id in 1..101 derived from the process id; under pytest-xdist each worker draws from its own
    residue class (worker w of n: ids 1 + w + n*k), so graphs of two workers never share a domain."""
    seed = salt if salt is not None else os.getpid()
    worker, workers = _worker()
    return 1 + worker + workers * (seed % (_MAX_DOMAIN // workers))


_graphs = itertools.count(1)


def next_domain_id() -> int:
    """A domain id for one more graph of this process: each graph gets its own (until 101 // workers graphs), none the
    process's own `pick_domain_id()`, so a node that outlives its graph cannot talk into the next one."""
    return pick_domain_id(os.getpid() + next(_graphs))


def _worker() -> tuple[int, int]:
    """(this pytest-xdist worker's index, the number of workers); (0, 1) outside xdist."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw") or "0"
    return int(worker), max(1, int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")))


def local_dds_env(domain_id: int | None = None, base: dict | None = None) -> dict[str, str]:
    """A copy of the environment with DDS on loopback and the given (or a fresh) domain id."""
    env = dict(os.environ if base is None else base)
    env["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
    env["ROS_DOMAIN_ID"] = str(pick_domain_id() if domain_id is None else domain_id)
    env.setdefault("RMW_IMPLEMENTATION", "rmw_fastrtps_cpp")
    # Node log files go to a throwaway place instead of ~/.ros when unset.
    env.setdefault("ROS_LOG_DIR", os.path.join(os.environ.get("TMPDIR", "/tmp"), "robot_rl_ros_logs"))
    return env


def apply_local_dds(domain_id: int | None = None) -> int:
    """Set the loopback DDS variables in this process (before rclpy.init); returns the domain id."""
    env = local_dds_env(domain_id)
    for key in ("ROS_AUTOMATIC_DISCOVERY_RANGE", "ROS_DOMAIN_ID", "RMW_IMPLEMENTATION", "ROS_LOG_DIR"):
        os.environ[key] = env[key]
    return int(env["ROS_DOMAIN_ID"])
