"""Simulator bridge: the MuJoCo Crazyflie model as the robot, behind Crazyswarm2's topics.

Publishes `odom` (nav_msgs/Odometry) at the real rate with optional latency and noise, takes
`cmd_vel_legacy` (Twist, Crazyswarm2 units) through an emulation of the firmware commander
(thrust lock, 0.5 s / 2 s watchdog, e-stop via the `emergency` service), and steps either on the
wall clock or lock-step on simulated time, publishing /clock for nodes with use_sim_time.
"""

from __future__ import annotations

import sys
from collections import deque

import numpy as np
from builtin_interfaces.msg import Time
from geometry_msgs.msg import PointStamped, Twist
from nav_msgs.msg import Odometry
from std_srvs.srv import Empty

from robot_rl_ros import qos
from robot_rl_ros.commander import gated_subscription
from robot_rl_ros.crazyflie_commander import CommanderEmulator
from robot_rl_ros.msgs import raw_to_odometry, twist_to_rpyt
from robot_rl_ros.params import declare
from robot_rl_ros.sim_bridge_base import BASE_PARAMS, SimBridgeBase, schedule_param, scheduled_point
from robot_rl_ros.sim_bridge_base import physical_params as physical_params_json
from robot_rl_ros.spin import node_main

PARAMS = {
    **BASE_PARAMS,
    # Lock-step: time advances without a command only after this much wall time; shorter, a policy process
    # stalled by a loaded machine (0.1-0.4 s) lets steps pass without commands until the safety node falls
    # back for a stale policy. Only a dead policy expires it.
    "step_timeout_s": 2.0,
    "initial_position": [0.0, 0.0, -1.0],  # z < 0: resting on the ground
    "rate_hz": 100.0,  # the simulator's step is 0.01 s; this is how often it is stepped in wall mode
    "latency_steps": 0,
    "position_noise_m": 0.0,
    "velocity_noise_mps": 0.0,
    "frame_id": "world",
    # A "real" robot for sim-to-real tests: physical parameters that differ from the model's, as JSON
    # (e.g. '{"mass_kg": 0.031, "motor_tau_s": 0.08}', names in sim.tasks.crazyflie.physical); '' : none.
    "physical_params": "",
    # An operator's goals for SITL: x, y, z of each in turn (flat), each held goal_hold_s of simulated time, published
    # on `goal` with each state, before the odometry (stamped with the current step): a policy acting on odometry
    # then has each goal from the step a log gives it. [0.0]: none (a goal comes from elsewhere).
    "goals": [0.0],
    "goal_hold_s": 2.0,
}


def make_sim(seed: int, randomize: bool, physical_params: str = ""):
    """The simulator is imported here only: the sim bridge is the one node allowed to use `sim`."""
    from sim.crazyflie_sitl import CrazyflieSitl

    return CrazyflieSitl(seed=seed, randomize=randomize, physical=physical_params_json(physical_params))


def rest_height() -> float:
    """Height of the body when the drone stands on the ground."""
    from sim.tasks.crazyflie import REST_Z

    return float(REST_Z)


class SimBridge(SimBridgeBase):
    def __init__(self, sim=None, **kwargs):
        super().__init__("sim_bridge", **kwargs)
        p = declare(self, PARAMS)
        self.p = p
        self.sim = sim if sim is not None else make_sim(p["seed"], p["randomize"], p["physical_params"])
        x, y, z = p["initial_position"]
        self.sim.reset(position=(x, y, z if z >= 0 else rest_height()))
        self.rng = np.random.default_rng(p["seed"])
        self.fw = CommanderEmulator()
        self.delay: deque = deque(maxlen=max(1, int(p["latency_steps"]) + 1))
        self.goal_schedule = schedule_param(p["goals"], "goals (x, y, z of each goal)")
        self.goal_pub = self.create_publisher(PointStamped, "goal", qos.SENSOR) if len(self.goal_schedule) else None
        self.state_pub = self.odom_pub = self.create_publisher(Odometry, "odom", qos.SENSOR)
        self.command_gate = gated_subscription(self, Twist, "cmd_vel_legacy", self._on_cmd, p["commander"], qos.COMMAND)
        self.create_service(Empty, "emergency", self._on_emergency)
        self.commands = 0
        self.crash_reported = False
        self.start_stepping(p, 1.0 / p["rate_hz"])

    def _on_cmd(self, msg: Twist, published_ns: int | None) -> None:
        self.commands += 1
        self.fw.on_setpoint(twist_to_rpyt(msg), self.sim_time())
        self.after_command(published_ns)

    def _on_emergency(self, request, response):
        self.fw.emergency_stop()
        self.get_logger().warning("emergency stop: motors off and locked")
        return response

    def advance(self) -> None:
        self.sim.step(self.fw.output(self.sim_time()))
        if self.sim.crashed and not self.crash_reported:
            self.crash_reported = True
            self.get_logger().error(f"simulated crash at t={self.sim.time:.2f} s")

    def publish_state(self, stamp: Time) -> None:
        if self.goal_pub is not None:
            hold_s, frame = self.p["goal_hold_s"], self.p["frame_id"]
            self.goal_pub.publish(scheduled_point(self.goal_schedule, self.sim.time, hold_s, stamp, frame))
        raw = {k: np.asarray(v, dtype=np.float64).copy() for k, v in self.sim.state().items()}
        if self.p["position_noise_m"] > 0:
            raw["position"] += self.rng.normal(0.0, self.p["position_noise_m"], 3)
        if self.p["velocity_noise_mps"] > 0:
            raw["velocity"] += self.rng.normal(0.0, self.p["velocity_noise_mps"], 3)
        self.delay.append((stamp, raw))
        if len(self.delay) == self.delay.maxlen:
            t, r = self.delay[0]  # the sample measured latency_steps ago, with its own stamp
            self.odom_pub.publish(raw_to_odometry(r, t, self.p["frame_id"], self.get_namespace().strip("/")))


main = node_main(SimBridge)  # the console script


if __name__ == "__main__":
    sys.exit(main())
