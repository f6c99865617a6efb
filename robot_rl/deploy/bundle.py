"""Policy bundles: policy.onnx + policy.yaml, validated before anything flies."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import yaml

from robot_rl.deploy.arm_ik import ARM_ACTION_MODES, ArmController
from robot_rl.deploy.observation import Integrator, ObsTerm

SCHEMA_VERSION = 1
ACTION_MODES = ("rpyt", "ctbr", "motors", "joint_position", *ARM_ACTION_MODES)


class BundleError(ValueError):
    """A policy bundle that cannot be used; the message says why in one line."""


@dataclass
class ActionSpec:
    mode: str
    names: list[str]
    offset: np.ndarray
    scale: np.ndarray
    low: np.ndarray
    high: np.ndarray

    def to_raw(self, policy_action: np.ndarray) -> np.ndarray:
        """Policy output (clipped to [-1, 1]) -> robot command units, within the limits."""
        a = np.clip(np.asarray(policy_action, dtype=np.float64), -1.0, 1.0)
        return np.clip(self.offset + self.scale * a, self.low, self.high)

    def to_dict(self) -> dict:
        return {
            "mode": self.mode,
            "names": list(self.names),
            "offset": self.offset.tolist(),
            "scale": self.scale.tolist(),
            "low": self.low.tolist(),
            "high": self.high.tolist(),
        }


@dataclass
class PolicyBundle:
    path: Path
    robot: str
    task: str
    control_rate_hz: float
    observation: list[ObsTerm]
    action: ActionSpec
    onnx_file: str
    onnx_sha256: str
    integrators: list[Integrator] = field(default_factory=list)
    normalizer: dict = field(default_factory=dict)
    source: dict = field(default_factory=dict)
    extra: dict = field(default_factory=dict)

    @property
    def obs_dim(self) -> int:
        return sum(t.dim for t in self.observation)

    @property
    def action_dim(self) -> int:
        return len(self.action.names)

    @property
    def onnx_path(self) -> Path:
        return self.path / self.onnx_file

    def to_dict(self) -> dict:
        return {
            "schema_version": SCHEMA_VERSION,
            "robot": self.robot,
            "task": self.task,
            "control_rate_hz": self.control_rate_hz,
            "observation": {
                "size": self.obs_dim,
                "terms": [t.to_dict() for t in self.observation],
                "integrators": [i.to_dict() for i in self.integrators],
            },
            "action": self.action.to_dict(),
            "onnx": {"file": self.onnx_file, "sha256": self.onnx_sha256, "input": "obs", "output": "actions"},
            "normalizer": self.normalizer,
            "source": self.source,
            "extra": self.extra,
        }


def sha256_file(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def _vec(d: dict, key: str, n: int) -> np.ndarray:
    v = np.asarray(d[key], dtype=np.float64).reshape(-1)
    if v.shape != (n,):
        raise BundleError(f"action.{key} has {v.size} values, expected {n}")
    return v


def load_bundle(path: str | Path, check_onnx: bool = True) -> PolicyBundle:
    """Read and validate a bundle directory (or its policy.yaml). Raises BundleError."""
    path = Path(path)
    if path.is_file():
        path = path.parent
    yaml_path = path / "policy.yaml"
    if not yaml_path.is_file():
        raise BundleError(f"no policy.yaml in {path}")
    try:
        doc = yaml.safe_load(yaml_path.read_text())
    except yaml.YAMLError as e:
        raise BundleError(f"{yaml_path} is not valid YAML: {str(e).splitlines()[0]}") from None
    if not isinstance(doc, dict):
        raise BundleError(f"{yaml_path} does not hold a mapping")
    version = doc.get("schema_version")
    if version != SCHEMA_VERSION:
        raise BundleError(
            f"{yaml_path}: schema_version {version!r} is not supported (this runtime reads {SCHEMA_VERSION})"
        )
    try:
        obs = doc["observation"]
        terms = [ObsTerm.from_dict(t) for t in obs["terms"]]
        act = doc["action"]
        names = [str(n) for n in act["names"]]
        if act["mode"] not in ACTION_MODES:
            raise BundleError(f"unknown action mode '{act['mode']}' (known: {', '.join(ACTION_MODES)})")
        action = ActionSpec(
            mode=act["mode"],
            names=names,
            offset=_vec(act, "offset", len(names)),
            scale=_vec(act, "scale", len(names)),
            low=_vec(act, "low", len(names)),
            high=_vec(act, "high", len(names)),
        )
        onnx = doc["onnx"]
        bundle = PolicyBundle(
            path=path,
            robot=str(doc["robot"]),
            task=str(doc["task"]),
            control_rate_hz=float(doc["control_rate_hz"]),
            observation=terms,
            integrators=[Integrator.from_dict(i) for i in obs.get("integrators") or []],
            action=action,
            onnx_file=str(onnx["file"]),
            onnx_sha256=str(onnx["sha256"]),
            normalizer=doc.get("normalizer") or {},
            source=doc.get("source") or {},
            extra=doc.get("extra") or {},
        )
    except BundleError:
        raise
    except (KeyError, TypeError, ValueError) as e:
        raise BundleError(f"{yaml_path} is malformed: {type(e).__name__}: {e}") from None
    if int(obs.get("size", bundle.obs_dim)) != bundle.obs_dim:
        raise BundleError(f"observation.size {obs.get('size')} != sum of term sizes {bundle.obs_dim}")
    if not bundle.control_rate_hz > 0:
        raise BundleError("control_rate_hz must be positive")
    if bundle.action.mode in ARM_ACTION_MODES:
        _check_arm(bundle, yaml_path)
    if check_onnx:
        if not bundle.onnx_path.is_file():
            raise BundleError(f"missing {bundle.onnx_path}")
        digest = sha256_file(bundle.onnx_path)
        if digest != bundle.onnx_sha256:
            raise BundleError(f"{bundle.onnx_path.name} sha256 {digest[:12]}... does not match policy.yaml")
    return bundle


def _check_arm(bundle: PolicyBundle, yaml_path: Path) -> None:
    """An arm bundle must carry what the runtime's IK needs (extra.ik, ik_orientation, gripper)."""
    try:
        arm = ArmController.from_bundle(bundle.action.mode, bundle.extra)
    except ValueError as e:
        raise BundleError(f"{yaml_path}: {e}") from None
    if bundle.action_dim != arm.command_dim:
        raise BundleError(
            f"{yaml_path}: {bundle.action.mode} actions for a {arm.spec.dof}-joint arm have {arm.command_dim} "
            f"values, action.names has {bundle.action_dim}"
        )


def write_bundle(bundle: PolicyBundle) -> Path:
    """Write policy.yaml for a bundle whose ONNX file is already in place (hash filled in here)."""
    bundle.onnx_sha256 = sha256_file(bundle.onnx_path)
    out = bundle.path / "policy.yaml"
    tmp = out.with_suffix(".yaml.tmp")
    tmp.write_text(yaml.safe_dump(bundle.to_dict(), sort_keys=False))
    tmp.replace(out)
    return out
