"""Simulator bridge for a Crazyflie team: one world of the crazyflie_swarm task (N drones, its clutter scene,
ToF sensors; randomization off by default), each drone behind its own namespace /<prefix>1 ... /<prefix>N.

Per drone it publishes, every control period (0.01 s):
- `odom` (nav_msgs/Odometry): position (m), orientation (xyzw, body to world), world-frame velocity (m/s),
  body rates (rad/s), the Crazyswarm2 convention;
- `setpoint` (nav_msgs/Odometry): the go-to planner's setpoint, pose.position (m) and twist.linear (m/s);
- `tof` (sensor_msgs/LaserScan): the ToF zone ranges in metres, floored to cm and clipped at range_max (2 m,
  also what an invalid zone reads) as in training, in the zone order of the bundle (extra.swarm.tof.yaw_deg);
and takes `cmd_motors` (std_msgs/Float64MultiArray: m1..m4 as fractions [0, 1] of each motor's maximum
thrust). A drone keeps its last motor command until a new one comes (none yet: motors off). Odometry can carry
Gaussian noise (position_noise_m, velocity_noise_mps), and a drone's three inputs can arrive latency_steps control
periods late, each with the stamp of when it was measured (the policy node acts on one step's matching stamps).

Lock-step: the world steps once every drone has sent a command since the last step; when some have and the
rest have not within straggler_timeout_s of wall time, it steps with their previous commands (a stalled
process shifts its drone's command by a step rather than stopping the team); with no command at all it steps
after step_timeout_s, as the one-drone bridge does. Time starts once every drone's odom has
start_after_subscribers readers.
"""

from __future__ import annotations

import sys
import time
from collections import deque

import numpy as np
from builtin_interfaces.msg import Time
from nav_msgs.msg import Odometry
from sensor_msgs.msg import LaserScan
from std_msgs.msg import Float64MultiArray

from robot_conventions.frames import quat_wxyz_to_xyzw
from robot_rl_ros import qos
from robot_rl_ros.commander import gated_subscription
from robot_rl_ros.msgs import range_zones, raw_to_odometry, setpoint_odometry
from robot_rl_ros.params import declare
from robot_rl_ros.sim_bridge_base import BASE_PARAMS, SimBridgeBase
from robot_rl_ros.spin import node_main

PARAMS = {
    **BASE_PARAMS,
    "step_timeout_s": 2.0,  # see sim_bridge: only a dead team lets time pass without commands
    "straggler_timeout_s": 0.5,
    "num_drones": 6,
    "prefix": "cf",
    "scene": 0,  # held-out scene index (sim.tasks.crazyflie_swarm HELD_OUT_BASE + scene)
    "scenario": "clutter",  # or gap
    "tof_noise": False,  # ToF noise and dropout as in training (off: flights replay exactly)
    "latency_steps": 0,  # a drone's inputs (odom, setpoint, tof) published this many control periods late
    "position_noise_m": 0.0,  # odometry noise (standard deviation), per axis and sample
    "velocity_noise_mps": 0.0,
    "rate_hz": 100.0,  # wall-clock mode only
    "frame_id": "world",
}


def make_swarm_sim(p: dict):
    """The simulator is imported here only: a sim bridge is the one node allowed to use `sim`."""
    from sim.crazyflie_swarm_sitl import CrazyflieSwarmSitl

    return CrazyflieSwarmSitl(
        num_drones=int(p["num_drones"]),
        scene=int(p["scene"]),
        seed=int(p["seed"]),
        randomize=bool(p["randomize"]),
        scenario=str(p["scenario"]),
        tof_noise=bool(p["tof_noise"]),
    )


class SwarmSimBridge(SimBridgeBase):
    def __init__(self, sim=None, **kwargs):
        super().__init__("swarm_sim_bridge", **kwargs)
        p = declare(self, PARAMS)
        self.p = p
        self.sim = sim if sim is not None else make_swarm_sim(p)
        self.sim.reset()
        n = self.sim.num_drones
        self.names = [f"{p['prefix']}{i + 1}" for i in range(n)]
        self.clip_m = float(self.sim.task.sensor_cfg.clip)
        self.motors = np.zeros((n, 4))
        self.pending: set[int] = set()
        self.first_pending_wall: float | None = None
        self.commands = [0] * n
        self.crash_reported = np.zeros(n, dtype=bool)
        self.rng = np.random.default_rng(int(p["seed"]))
        self.delayed = [deque(maxlen=max(1, int(p["latency_steps"]) + 1)) for _ in range(n)]
        self.odom_pubs = [self.create_publisher(Odometry, f"/{d}/odom", qos.SENSOR) for d in self.names]
        self.setpoint_pubs = [self.create_publisher(Odometry, f"/{d}/setpoint", qos.SENSOR) for d in self.names]
        self.tof_pubs = [self.create_publisher(LaserScan, f"/{d}/tof", qos.SENSOR) for d in self.names]
        self.state_pub = self.odom_pubs[0]
        self.command_gates = [
            gated_subscription(
                self, Float64MultiArray, f"/{d}/cmd_motors", self._make_cmd_cb(i), p["commander"], qos.COMMAND
            )
            for i, d in enumerate(self.names)
        ]
        self.straggler_timeout_s = float(p["straggler_timeout_s"])
        if p["lockstep"]:
            self.create_timer(min(0.01, self.straggler_timeout_s), self._on_straggler_timer)
        self.start_stepping(p, 1.0 / p["rate_hz"])

    def subscriber_count(self) -> int:
        return min(pub.get_subscription_count() for pub in self.odom_pubs)

    def _make_cmd_cb(self, i: int):
        def cb(msg: Float64MultiArray, published_ns: int | None) -> None:
            cmd = np.asarray(msg.data, dtype=np.float64)
            if cmd.shape != (4,) or not np.all(np.isfinite(cmd)):
                self.get_logger().error(
                    f"{self.names[i]}: motor command {list(msg.data)} rejected", throttle_duration_sec=1.0
                )
                return
            self.motors[i] = np.clip(cmd, 0.0, 1.0)
            self.commands[i] += 1
            if not self.answers_current_state(published_ns):
                return  # a late command for an earlier state: the new motor values, no step
            if not self.pending:
                self.first_pending_wall = time.monotonic()
            self.pending.add(i)
            if len(self.pending) == len(self.names):
                self.after_command()

        return cb

    def _on_straggler_timer(self) -> None:
        if self.started and self.pending and time.monotonic() - self.first_pending_wall >= self.straggler_timeout_s:
            self.step()

    def advance(self) -> None:
        self.pending.clear()
        self.sim.step(self.motors)
        crashed = self.sim.crashed()
        for i in np.flatnonzero(crashed & ~self.crash_reported):
            self.crash_reported[i] = True
            self.get_logger().error(f"{self.names[i]}: simulated crash at t={self.sim.time:.2f} s")

    def publish_state(self, stamp: Time) -> None:
        frame = self.p["frame_id"]
        for i, d in enumerate(self.names):
            s = self.sim.state(i)  # copies (as are setpoint and tof): safe to keep while delayed
            raw = {**s, "quaternion": quat_wxyz_to_xyzw(s["quaternion_wxyz"])}
            if self.p["position_noise_m"] > 0:
                raw["position"] = raw["position"] + self.rng.normal(0.0, self.p["position_noise_m"], 3)
            if self.p["velocity_noise_mps"] > 0:
                raw["velocity"] = raw["velocity"] + self.rng.normal(0.0, self.p["velocity_noise_mps"], 3)
            sp, sv = self.sim.setpoint(i)
            delay = self.delayed[i]
            delay.append((stamp, raw, sp, sv, self.sim.tof(i)))
            if len(delay) == delay.maxlen:  # what was measured latency_steps ago, with its own stamp
                t, r, sp, sv, tof = delay[0]
                self.odom_pubs[i].publish(raw_to_odometry(r, t, frame, d))
                self.setpoint_pubs[i].publish(setpoint_odometry(sp, sv, t, frame))
                self.tof_pubs[i].publish(range_zones(tof, t, self.clip_m, d))


main = node_main(SwarmSimBridge)  # the console script


if __name__ == "__main__":
    sys.exit(main())
