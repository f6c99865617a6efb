"""`robot-rl deploy check` against a running sim bridge (wall clock) and against a bad robot."""

from __future__ import annotations

import threading

import numpy as np
import pytest

pytest.importorskip("rclpy")

from conftest import DOMAIN_ID, write_pd_bundle  # noqa: E402
from robot_rl_ros.deploy_check import main  # noqa: E402
from robot_rl_ros.sitl import SitlGraph  # noqa: E402

DOMAIN = 1 + (DOMAIN_ID + 37) % 101


@pytest.fixture(scope="module")
def sim_bridge(tmp_path_factory):
    with SitlGraph("cf1", domain_id=DOMAIN, lockstep=False, log_dir=str(tmp_path_factory.mktemp("logs"))) as g:
        g.start("sim_bridge", "sim_bridge", {"lockstep": False})
        # The first check waits for the bridge itself (import + model load) before it listens.
        import time

        from robot_rl_ros.deploy_check import parse_args, run_check

        t_end = time.monotonic() + 60.0
        while time.monotonic() < t_end:
            args = parse_args(["/nonexistent", "--domain-id", str(DOMAIN), "--seconds", "0.5"])
            found = {(f.level, f.what, "sim_bridge" in f.detail) for f in run_check(args).findings}
            if {("ok", "/cf1/odom rate", False), ("ok", "/cf1/cmd_vel_legacy", True)} <= found:
                break  # our bridge is up and streaming
        yield g


def test_ready_against_the_sim_bridge(sim_bridge, pd_bundle, capsys):
    rc = main([str(pd_bundle), "--domain-id", str(DOMAIN), "--seconds", "1.5"])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "ok    /cf1/odom: nav_msgs/msg/Odometry" in out
    rate = float(out.split("/cf1/odom rate: ")[1].split()[0])
    assert 80.0 <= rate <= 120.0, out
    assert "taken by /cf1/sim_bridge" in out and "/cf1/emergency: std_srvs/srv/Empty" in out
    assert "would command roll=" in out and out.strip().endswith("ready to arm")


class BadRobot:
    """Plays a robot that gets things wrong: 20 Hz odometry, a quaternion that is not unit length,
    angular rates in deg/s, and a second publisher on cmd_vel_legacy."""

    def __init__(self, domain: int):
        import rclpy
        from geometry_msgs.msg import Twist
        from nav_msgs.msg import Odometry
        from rclpy.context import Context
        from rclpy.executors import SingleThreadedExecutor
        from robot_rl_ros import qos
        from robot_rl_ros.msgs import raw_to_odometry

        self.ctx = Context()
        rclpy.init(context=self.ctx, domain_id=domain)
        self.node = rclpy.create_node("bad_robot", namespace="/cf2", context=self.ctx)
        odom = self.node.create_publisher(Odometry, "odom", qos.SENSOR)
        self.node.create_publisher(Twist, "cmd_vel_legacy", qos.COMMAND)
        raw = {
            "position": np.array([0.0, 0.0, 1.0]),
            "velocity": np.zeros(3),
            "quaternion": np.array([0.0, 0.0, 0.0, 2.0]),
            "angular_velocity": np.array([0.0, 0.0, 90.0]),  # deg/s where rad/s belong
        }
        self.node.create_timer(0.05, lambda: odom.publish(raw_to_odometry(raw, self.node.get_clock().now().to_msg())))
        self.ex = SingleThreadedExecutor(context=self.ctx)
        self.ex.add_node(self.node)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._spin, daemon=True)
        self.thread.start()

    def _spin(self) -> None:
        while not self.stop.is_set():
            self.ex.spin_once(timeout_sec=0.01)

    def close(self) -> None:
        self.stop.set()
        self.thread.join(2.0)
        self.ex.shutdown()
        self.node.destroy_node()
        self.ctx.try_shutdown()


def test_reports_every_blocker(sim_bridge, tmp_path, capsys):
    arm_bundle = write_pd_bundle(tmp_path / "other", robot="ur5e")
    bad = BadRobot(DOMAIN)
    try:
        rc = main([str(arm_bundle), "--namespace", "cf2", "--domain-id", str(DOMAIN), "--seconds", "1.5"])
    finally:
        bad.close()
    out = capsys.readouterr().out
    assert rc == 1, out
    blocks = [line for line in out.splitlines() if line.startswith("BLOCK")]
    expected = [
        "bundle: bundle is for robot 'ur5e'",
        "/cf2/odom rate:",
        "quaternion norm 2.000",
        "|angular_velocity| 90 > 35",
        "/cf2/cmd_vel_legacy: no subscriber",
        "already published by /cf2/bad_robot",
    ]
    for e in expected:
        assert any(e in b for b in blocks), f"missing '{e}' in:\n{out}"
    assert "WARN  /cf2/emergency: no emergency service" in out


def test_missing_topics_block(sim_bridge, pd_bundle, capsys):
    rc = main([str(pd_bundle), "--namespace", "cf9", "--domain-id", str(DOMAIN), "--seconds", "0.5"])
    out = capsys.readouterr().out
    assert rc == 1 and "BLOCK /cf9/odom: no publisher (expected nav_msgs/msg/Odometry)" in out, out


def test_usage_error_is_status_2(capsys):
    assert main([]) == 2


def test_a_swarm_bundle_is_sent_to_sitl_with_status_2(tmp_path, capsys):
    (tmp_path / "policy.yaml").write_text("robot: crazyflie_2_1\nextra:\n  swarm: {num_drones: 6}\n")
    assert main([str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "swarm bundle" in err and f"robot-rl sitl bundle={tmp_path}" in err


@pytest.mark.parametrize(
    "module,bundle_fixture,ns,expect",
    [
        ("arm_sim_bridge", "trained_arm_bundle", "arm", "would command panda_joint1="),
        ("quadruped_sim_bridge", "trained_quadruped_bundle", "go1", "would command FR_hip_rad="),
    ],
)
def test_ready_against_the_arm_and_quadruped_sim_bridges(module, bundle_fixture, ns, expect, request, capsys):
    """The robot's profile comes from the bundle: its namespace, inputs, command topic and action."""
    import time

    bundle = str(request.getfixturevalue(bundle_fixture))
    domain = 1 + (DOMAIN_ID + 41) % 101
    with SitlGraph(ns, domain_id=domain, lockstep=False) as g:
        g.start("sim_bridge", module, {"lockstep": False})
        t_end, rc, out = time.monotonic() + 60.0, None, ""
        while rc != 0 and time.monotonic() < t_end:  # the bridge needs a few seconds to load its model
            rc = main([bundle, "--domain-id", str(domain), "--seconds", "1.0"])
            out = capsys.readouterr().out
    assert rc == 0, out
    assert expect in out and out.strip().endswith("ready to arm"), out
    assert f"taken by /{ns}/" in out and f"/{ns}/emergency: std_srvs/srv/Empty" in out
