"""Crazyflie bridge (direct mode): cflib to the drone, Crazyswarm2's topic names to ROS.

`odom` out (nav_msgs/Odometry, from 100 Hz log blocks), `cmd_vel_legacy` in (Twist, Crazyswarm2
units), `emergency` service (std_srvs/Empty). With a Crazyswarm2 server running instead, this
node is not needed: the safety node speaks the same topics. Many drones: one bridge per
namespace (`/cf1`, `/cf2`, ...), each with its URI.
"""

from __future__ import annotations

import sys

from geometry_msgs.msg import Twist
from nav_msgs.msg import Odometry
from rclpy.node import Node
from std_srvs.srv import Empty

from robot_rl_ros import qos
from robot_rl_ros.cflib_link import CflibLink, SetpointStreamer
from robot_rl_ros.commander import gated_subscription
from robot_rl_ros.msgs import raw_to_odometry, twist_to_rpyt
from robot_rl_ros.params import declare
from robot_rl_ros.spin import node_main

PARAMS = {
    "uri": "radio://0/80/2M/E7E7E7E7E7",
    "log_period_ms": 10,
    "frame_id": "world",
    "command_loss_s": 0.3,
    "land_on_command_loss": True,
    # Commands are taken only from this node's stream ('' : from anyone), see robot_rl_ros.commander.
    "commander": "safety",
}


class CrazyflieBridge(Node):
    def __init__(self, link_factory=CflibLink, **kwargs):
        super().__init__("crazyflie_bridge", **kwargs)
        p = declare(self, PARAMS)
        self.frame_id = p["frame_id"]
        self.odom_pub = self.create_publisher(Odometry, "odom", qos.SENSOR)
        self.link = link_factory(p["uri"], self._on_state, p["log_period_ms"])
        self.link.open()
        self.streamer = SetpointStreamer(self.link.cf, p["command_loss_s"], p["land_on_command_loss"])
        self.command_gate = gated_subscription(self, Twist, "cmd_vel_legacy", self._on_cmd, p["commander"], qos.COMMAND)
        self.create_service(Empty, "emergency", self._on_emergency)
        self.create_timer(0.05, self._on_check)  # 20 Hz: notices a silent command stream within 0.35 s

    def _on_state(self, raw: dict) -> None:  # called from cflib's thread
        if not self.context.ok():  # shutting down: rclpy's context goes before the cflib link does
            return
        stamp = self.get_clock().now().to_msg()
        self.odom_pub.publish(raw_to_odometry(raw, stamp, self.frame_id, self.get_namespace().strip("/")))

    def _on_cmd(self, msg: Twist, published_ns: int | None) -> None:
        if not self.streamer.send(twist_to_rpyt(msg)):
            self.get_logger().error("dropped a non-finite cmd_vel_legacy", throttle_duration_sec=1.0)

    def _on_emergency(self, request, response):
        self.streamer.emergency_stop()
        self.get_logger().warning("emergency stop sent")
        return response

    def _on_check(self) -> None:
        if self.streamer.check():
            self.get_logger().error("cmd_vel_legacy stopped: handed back to the high-level commander to land")

    def close(self) -> None:
        self.link.on_state = lambda raw: None
        self.streamer.release()
        self.link.close()


main = node_main(CrazyflieBridge)  # the console script


if __name__ == "__main__":
    sys.exit(main())
