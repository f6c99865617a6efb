"""Pre-arm checks of a policy bundle against the robot it is about to drive."""

from __future__ import annotations

from dataclasses import dataclass

from robot_rl.deploy import BundleError, PolicyBundle, load_bundle
from robot_rl.deploy.bundle import SCHEMA_VERSION as SUPPORTED_SCHEMA  # noqa: F401 - the runtime decides


@dataclass(frozen=True)
class RobotSpec:
    robot: str = "crazyflie_2_1"
    action_mode: str = "rpyt"
    action_dim: int = 4
    min_rate_hz: float = 10.0  # the firmware watchdog needs setpoints at 10 Hz at least
    max_rate_hz: float = 500.0


def check_bundle(bundle_dir: str, spec: RobotSpec) -> tuple[PolicyBundle | None, list[str]]:
    """Load and check a bundle; returns it (or None) and the list of problems that block arming."""
    if not bundle_dir:
        return None, ["no policy bundle given (parameter 'bundle')"]
    try:
        # schema version, ONNX sha256, integrity hash over policy.onnx + policy.yaml, semantic checks
        bundle = load_bundle(bundle_dir, check_onnx=True)
    except BundleError as e:
        return None, [f"bundle: {e}"]
    problems = []
    if bundle.robot != spec.robot:
        problems.append(f"bundle is for robot '{bundle.robot}', this is '{spec.robot}'")
    if bundle.action.mode != spec.action_mode:
        problems.append(f"bundle action mode '{bundle.action.mode}' != robot '{spec.action_mode}'")
    if bundle.action_dim != spec.action_dim:
        problems.append(f"bundle has {bundle.action_dim} actions, robot takes {spec.action_dim}")
    if not spec.min_rate_hz <= bundle.control_rate_hz <= spec.max_rate_hz:
        problems.append(f"bundle rate {bundle.control_rate_hz} Hz outside [{spec.min_rate_hz}, {spec.max_rate_hz}] Hz")
    return bundle, problems
