"""Policy bundles: policy.onnx + policy.yaml, validated before anything flies.

Integrity: policy.yaml's integrity.sha256 covers policy.onnx (its sha256) and the whole of policy.yaml but that
field, so an edited YAML (two same-size observation terms swapped, limits swapped) is refused like a changed
ONNX file. Semantic checks then refuse what no export writes: limits out of order, a layout whose size is not
the network's input, normalizer statistics of another size, quaternions that are not unit quaternions.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import yaml

from robot_rl.deploy.arm_ik import ARM_ACTION_MODES, ArmController
from robot_rl.deploy.observation import Integrator, ObsTerm
from robot_rl.deploy.plan_executor import PLAN_FEATURES_INPUT, PlanSpec, PlanSpecError

SCHEMA_VERSION = 2  # 2: integrity hash over policy.onnx + policy.yaml (1 hashed policy.onnx only)
ACTION_MODES = ("rpyt", "ctbr", "motors", "joint_position", *ARM_ACTION_MODES)


class BundleError(ValueError):
    """A policy bundle that cannot be used; the message says why in one line."""


@dataclass(frozen=True)
class RecurrentState:
    """A value the network reads as an extra input and writes back as an extra output each step (a recurrent
    policy's hidden state, an imported pipeline's feedback): the runtime keeps it between steps."""

    input: str
    output: str
    initial: tuple[float, ...]

    @property
    def dim(self) -> int:
        return len(self.initial)

    @staticmethod
    def from_dict(d: dict) -> RecurrentState:
        return RecurrentState(str(d["input"]), str(d["output"]), tuple(float(x) for x in d["initial"]))

    def to_dict(self) -> dict:
        return {"input": self.input, "output": self.output, "initial": list(self.initial)}


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
    state: list[RecurrentState] = field(default_factory=list)  # empty for a memoryless policy
    plan: PlanSpec | None = None  # a plan-guided policy's plan controller (plan_executor); None for the others

    @property
    def obs_dim(self) -> int:
        return sum(t.dim for t in self.observation)

    @property
    def action_dim(self) -> int:
        return len(self.action.names)

    @property
    def onnx_path(self) -> Path:
        return self.path / self.onnx_file

    def servo_gains(self, motors: int) -> tuple[np.ndarray, np.ndarray]:
        """(kp, kd), one per motor, of a joint-target bundle's servos (extra.servo: one gain for every motor, as our
        bundles carry, or one per motor, as imported ones do); BundleError if it carries none that fit."""
        servo = self.extra.get("servo")
        try:
            kp, kd = (np.broadcast_to(np.asarray(servo[k], dtype=np.float64), (motors,)).copy() for k in ("kp", "kd"))
        except (KeyError, TypeError, ValueError):
            raise BundleError(
                f"{self.path}: bundle carries no servo gains for {motors} motors (extra.servo.kp, extra.servo.kd)"
            ) from None
        return kp, kd

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
            "onnx": self._onnx_dict(),
            "normalizer": self.normalizer,
            "source": self.source,
            "extra": self.extra,
            # only plan-guided bundles carry the key: every other bundle's YAML stays as it was
            **({"plan": self.plan.to_dict()} if self.plan is not None else {}),
        }

    def _onnx_dict(self) -> dict:
        d = {"file": self.onnx_file, "sha256": self.onnx_sha256, "input": "obs", "output": "actions"}
        if self.state:  # only stateful bundles carry the key: every other bundle's YAML stays as it was
            d["state"] = [s.to_dict() for s in self.state]
        return d


def sha256_file(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


# libyaml's parser where installed (same constructors, several times faster on the normalizer's lists)
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def integrity_hash(doc: dict, onnx_sha256: str) -> str:
    """sha256 over the ONNX file's sha256 and policy.yaml's content without its integrity field, as canonical
    JSON of the document as YAML reads it back (key order, spacing and comments do not count; every value does)."""
    body = {k: v for k, v in doc.items() if k != "integrity"}
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), allow_nan=True)
    return hashlib.sha256(f"robot_rl bundle\n{onnx_sha256}\n{canonical}".encode()).hexdigest()


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
        doc = yaml.load(yaml_path.read_text(), Loader=_LOADER)
    except yaml.YAMLError as e:
        raise BundleError(f"{yaml_path} is not valid YAML: {str(e).splitlines()[0]}") from None
    except UnicodeDecodeError:
        raise BundleError(f"{yaml_path} is not text: not a policy.yaml") from None
    if not isinstance(doc, dict):
        raise BundleError(f"{yaml_path} does not hold a mapping")
    version = doc.get("schema_version")
    if version == 1:
        raise BundleError(
            f"{yaml_path}: schema_version 1 bundles hash policy.onnx only, nothing vouches for policy.yaml: "
            "re-export it (robot-rl export run=<run>)"
        )
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
            state=[RecurrentState.from_dict(x) for x in onnx.get("state") or []],
            plan=PlanSpec.from_dict(doc["plan"]) if doc.get("plan") is not None else None,
        )
    except PlanSpecError as e:
        raise BundleError(f"{yaml_path}: {e}") from None
    except BundleError:
        raise
    except (KeyError, TypeError, ValueError) as e:
        raise BundleError(f"{yaml_path} is malformed: {type(e).__name__}: {e}") from None
    if int(obs.get("size", bundle.obs_dim)) != bundle.obs_dim:
        raise BundleError(f"observation.size {obs.get('size')} != sum of term sizes {bundle.obs_dim}")
    if not (bundle.control_rate_hz > 0 and math.isfinite(bundle.control_rate_hz)):
        raise BundleError("control_rate_hz must be positive")
    digest = bundle.onnx_sha256
    if check_onnx:
        if not bundle.onnx_path.is_file():
            raise BundleError(f"missing {bundle.onnx_path}")
        digest = sha256_file(bundle.onnx_path)
        if digest != bundle.onnx_sha256:
            raise BundleError(f"{bundle.onnx_path.name} sha256 {digest[:12]}... does not match policy.yaml")
    integrity = doc.get("integrity")
    want = integrity.get("sha256") if isinstance(integrity, dict) else None
    if not want:
        raise BundleError(f"{yaml_path} has no integrity.sha256: not written by robot_rl's export; re-export it")
    if integrity_hash(doc, digest) != want:
        raise BundleError(
            f"{yaml_path} was edited after export (its content does not match integrity.sha256): refused; "
            "re-export the bundle"
        )
    # what the hash cannot tell: a bundle exported from a wrong task spec, or resealed by hand
    check_semantics(bundle, yaml_path)
    if bundle.action.mode in ARM_ACTION_MODES:
        _check_arm(bundle, yaml_path)
    _check_plan(bundle, yaml_path)
    if check_onnx:
        _check_onnx_io(bundle)
    return bundle


def _bad(values: np.ndarray) -> bool:
    return bool(np.any(np.isnan(values)))


def check_semantics(bundle: PolicyBundle, yaml_path: Path) -> None:
    """What no export writes: limits out of order, offsets outside them, zero or negative scales, layout
    terms of no size, normalizer statistics of another size or not positive, non-unit quaternions."""
    a = bundle.action
    if not a.names or len(set(a.names)) != len(a.names):
        raise BundleError(f"{yaml_path}: action.names must be distinct and not empty")
    for key in ("offset", "scale", "low", "high"):
        if _bad(getattr(a, key)):
            raise BundleError(f"{yaml_path}: action.{key} holds NaN")
    for i, name in enumerate(a.names):
        if not a.low[i] < a.high[i]:
            raise BundleError(f"{yaml_path}: action '{name}' has low {a.low[i]:g} >= high {a.high[i]:g}")
        if not a.low[i] <= a.offset[i] <= a.high[i]:
            raise BundleError(
                f"{yaml_path}: action '{name}' offset {a.offset[i]:g} lies outside [{a.low[i]:g}, {a.high[i]:g}]"
            )
        if not (0 < a.scale[i] < np.inf):
            raise BundleError(f"{yaml_path}: action '{name}' scale {a.scale[i]:g} must be positive and finite")
    for t in bundle.observation:
        if t.dim < 1 or not (0 < abs(t.scale) < np.inf) or not t.clip > 0:
            raise BundleError(
                f"{yaml_path}: observation term '{t.name}' needs dim >= 1, a finite non-zero scale "
                f"and a positive clip (dim {t.dim}, scale {t.scale:g}, clip {t.clip:g})"
            )
    norm = bundle.normalizer
    for key in ("mean", "std"):
        if key not in norm:
            continue
        try:
            v = np.asarray(norm[key], dtype=np.float64).reshape(-1)
        except (TypeError, ValueError):
            raise BundleError(f"{yaml_path}: normalizer.{key} is not a list of numbers") from None
        if v.size != bundle.obs_dim:
            raise BundleError(f"{yaml_path}: normalizer.{key} has {v.size} values, the observation {bundle.obs_dim}")
        if not np.all(np.isfinite(v)) or (key == "std" and not np.all(v > 0)):
            raise BundleError(f"{yaml_path}: normalizer.{key} must be finite{' and positive' if key == 'std' else ''}")
    for where, q in _quaternions(bundle.extra, "extra"):
        norm_q = float(np.linalg.norm(q))
        if not abs(norm_q - 1.0) < 1e-3:
            raise BundleError(f"{yaml_path}: {where} is not a unit quaternion (norm {norm_q:.4g})")


def _quaternions(node, where: str):
    """(path, values) of every 4-number list under a key that names a quaternion (quat, quaternion, ...)."""
    if isinstance(node, dict):
        for k, v in node.items():
            if "quat" in str(k).lower() and isinstance(v, (list, tuple)) and len(v) == 4:
                try:
                    yield f"{where}.{k}", np.asarray(v, dtype=np.float64)
                except (TypeError, ValueError):
                    raise BundleError(f"{where}.{k} is not a list of numbers") from None
            else:
                yield from _quaternions(v, f"{where}.{k}")
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _quaternions(v, f"{where}[{i}]")


def _check_onnx_io(bundle: PolicyBundle) -> None:
    """The network reads the layout's size and writes one value per action (what the runtime will feed it)."""
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    opts.inter_op_num_threads = 1
    try:
        session = ort.InferenceSession(str(bundle.onnx_path), sess_options=opts, providers=["CPUExecutionProvider"])
    except Exception as e:  # onnxruntime raises its own exception types for corrupt models
        raise BundleError(f"{bundle.onnx_path} cannot be loaded by onnxruntime: {str(e).splitlines()[0]}") from None
    n_in, n_out = session.get_inputs()[0].shape[-1], session.get_outputs()[0].shape[-1]
    if n_in != bundle.obs_dim:  # the runtime's words (PolicyRuntime checks the same)
        raise BundleError(f"ONNX input size {n_in} does not match observation layout size {bundle.obs_dim}")
    if n_out != bundle.action_dim:
        raise BundleError(f"ONNX output size {n_out} does not match {bundle.action_dim} actions")
    check_state_io(bundle, session)


def check_state_io(bundle: PolicyBundle, session) -> None:
    """Every recurrent state the bundle names is an input and an output of the network, of its size."""
    inputs = {i.name: i.shape[-1] for i in session.get_inputs()[1:]}
    outputs = {o.name: o.shape[-1] for o in session.get_outputs()[1:]}
    for s in bundle.state:
        if inputs.get(s.input) != s.dim or outputs.get(s.output) != s.dim:
            raise BundleError(
                f"state '{s.input}' -> '{s.output}' ({s.dim} values) is not an input and output of "
                f"{bundle.onnx_path.name} of that size"
            )
    extra = sorted(set(inputs) - {s.input for s in bundle.state})
    if extra:
        raise BundleError(f"{bundle.onnx_path.name} has inputs policy.yaml does not feed: {', '.join(extra)}")


def _check_plan(bundle: PolicyBundle, yaml_path: Path) -> None:
    """A plan-guided bundle drives the TCP and observes the plan features; no other bundle reads them."""
    reads = any(PLAN_FEATURES_INPUT in t.inputs for t in bundle.observation)
    if bundle.plan is None:
        if reads:
            raise BundleError(f"{yaml_path}: the observation reads {PLAN_FEATURES_INPUT} but there is no plan section")
        return
    if bundle.action.mode not in ("ee_position", "ee_pose"):
        raise BundleError(f"{yaml_path}: a plan drives the TCP (ee_position or ee_pose), not {bundle.action.mode}")
    if not reads:
        raise BundleError(f"{yaml_path}: a plan-guided policy observes {PLAN_FEATURES_INPUT}; no term reads it")


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
    doc = yaml.load(yaml.safe_dump(bundle.to_dict(), sort_keys=False), Loader=_LOADER)  # hashed as it reads back
    doc["integrity"] = {
        "sha256": integrity_hash(doc, bundle.onnx_sha256),
        "covers": "onnx.sha256 of policy.onnx and all of policy.yaml but this field (robot_rl.deploy.bundle)",
    }
    out = bundle.path / "policy.yaml"
    tmp = out.with_suffix(".yaml.tmp")
    tmp.write_text(yaml.safe_dump(doc, sort_keys=False))
    tmp.replace(out)
    return out
