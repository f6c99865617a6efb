"""What runs on a robot: policy bundles, observations from raw state, units. numpy + onnxruntime only."""

from robot_rl.deploy.bundle import BundleError, PolicyBundle, load_bundle
from robot_rl.deploy.runtime import PolicyRuntime

__all__ = ["BundleError", "PolicyBundle", "PolicyRuntime", "load_bundle"]
