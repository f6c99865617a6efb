"""Fixtures for the ROS 2 package tests: import paths, a private DDS domain, a small rpyt bundle."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
# pytest runs with --import-mode=importlib; the tests here import their harness module by name
for p in (ROOT / "ros_nodes", ROOT, Path(__file__).resolve().parent):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))

from robot_rl_ros.rosenv import apply_local_dds  # noqa: E402

# Before any rclpy context exists: loopback discovery and a domain of this test process only.
DOMAIN_ID = apply_local_dds()

HOVER_PWM = 38000.0


def write_pd_bundle(path: Path, rate_hz: float = 100.0, robot: str = "crazyflie_2_1", mode: str = "rpyt") -> Path:
    """A real bundle (ONNX + policy.yaml) whose network is a linear PD hover controller.

    It is test data, not a stand-in for our code: the runtime, nodes and safety layer treat it
    exactly like an exported policy.
    """
    import onnx
    from onnx import TensorProto, helper

    from robot_rl.deploy.bundle import ActionSpec, PolicyBundle, write_bundle
    from robot_rl.deploy.observation import ObsTerm

    scale = np.array([20.0, 20.0, 90.0, 20000.0])
    kp, kd, kpz, kdz = 10.0, 8.0, 12000.0, 9000.0
    # obs = [position - goal (3), velocity (3)]; rows: roll, pitch, yaw rate, thrust (robot units)
    w = np.zeros((4, 6))
    w[0, 1], w[0, 4] = kp, kd  # y error -> positive roll (accelerates toward -y)
    w[1, 0], w[1, 3] = -kp, -kd  # x error -> negative pitch (accelerates toward -x)
    w[3, 2], w[3, 5] = -kpz, -kdz
    w = (w / scale[:, None]).T.astype(np.float32)  # (6, 4), policy space
    graph = helper.make_graph(
        [
            helper.make_node("MatMul", ["obs", "W"], ["y"]),
            helper.make_node("Clip", ["y", "lo", "hi"], ["actions"]),
        ],
        "pd_hover",
        [helper.make_tensor_value_info("obs", TensorProto.FLOAT, ["batch", 6])],
        [helper.make_tensor_value_info("actions", TensorProto.FLOAT, ["batch", 4])],
        [
            helper.make_tensor("W", TensorProto.FLOAT, w.shape, w.flatten()),
            helper.make_tensor("lo", TensorProto.FLOAT, [], [-1.0]),
            helper.make_tensor("hi", TensorProto.FLOAT, [], [1.0]),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    path.mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(path / "policy.onnx"))
    bundle = PolicyBundle(
        path=path,
        robot=robot,
        task="hover_test",
        control_rate_hz=rate_hz,
        observation=[
            ObsTerm("pos_err", "difference", ("position", "goal"), 3, 1.0, 10.0),
            ObsTerm("vel", "identity", ("velocity",), 3, 1.0, 10.0),
        ],
        action=ActionSpec(
            mode=mode,
            names=["roll", "pitch", "yaw_rate", "thrust"],
            offset=np.array([0.0, 0.0, 0.0, HOVER_PWM]),
            scale=scale,
            low=np.array([-20.0, -20.0, -90.0, 0.0]),
            high=np.array([20.0, 20.0, 90.0, 60000.0]),
        ),
        onnx_file="policy.onnx",
        onnx_sha256="",
    )
    write_bundle(bundle)
    return path


@pytest.fixture(scope="session")
def pd_bundle(tmp_path_factory) -> Path:
    return write_pd_bundle(tmp_path_factory.mktemp("bundle") / "pd_hover")


@pytest.fixture(scope="session")
def limit_ledger():
    """Every command the independent watchers saw across the fault tests; none may be out of limits."""
    from watch import LimitLedger

    ledger = LimitLedger()
    yield ledger
    assert not ledger.violations, (
        f"{len(ledger.violations)} of {ledger.seen} commands out of limits: {ledger.violations[:5]}"
    )
