"""Run a policy bundle: raw robot state in, robot command out (numpy + onnxruntime)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from robot_rl.deploy.arm_ik import ARM_ACTION_MODES, ArmController
from robot_rl.deploy.bundle import BundleError, PolicyBundle, check_state_io, load_bundle
from robot_rl.deploy.observation import build_observation
from robot_rl.deploy.plan_executor import PLAN_FEATURES_INPUT, PlanExecutor


def make_session(onnx_path: Path, threads: int = 1):
    """An onnxruntime session with one intra-op thread and no spin-waiting (robots share cores)."""
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
    opts.add_session_config_entry("session.inter_op.allow_spinning", "0")
    try:
        return ort.InferenceSession(str(onnx_path), sess_options=opts, providers=["CPUExecutionProvider"])
    except Exception as e:  # onnxruntime raises its own exception types for corrupt models
        raise BundleError(f"{onnx_path} cannot be loaded by onnxruntime: {str(e).splitlines()[0]}") from None


class PolicyRuntime:
    """Builds the observation from raw state, runs the ONNX policy, maps the action to robot units.

    The last policy action (in policy space) is kept and offered to the layout as 'last_action',
    as in training. For an arm bundle (ee_pose, ee_position, joint actions) act() goes on through
    the bundle's IK to joint position targets, as the simulator's task does (see arm_ik). A plan-guided
    bundle runs its plan controller (plan_executor) around the network: the plan's features go into the
    observation, the network's output is a residual on the plan's action, and the sum is the action
    (start_plan() picks which of the bundle's plans; reset() restarts it).
    """

    def __init__(self, bundle: PolicyBundle | str | Path):
        self.bundle = bundle if isinstance(bundle, PolicyBundle) else load_bundle(bundle)
        self.session = make_session(self.bundle.onnx_path)
        inp = self.session.get_inputs()[0]
        out = self.session.get_outputs()[0]
        self._input_name = inp.name
        self._output_names = [out.name] + [s.output for s in self.bundle.state]
        check_state_io(self.bundle, self.session)
        self.state = self._initial_state()
        if inp.shape[-1] != self.bundle.obs_dim:
            raise BundleError(
                f"ONNX input size {inp.shape[-1]} does not match observation layout size {self.bundle.obs_dim}"
            )
        if out.shape[-1] != self.bundle.action_dim:
            raise BundleError(f"ONNX output size {out.shape[-1]} does not match {self.bundle.action_dim} actions")
        self.dt = 1.0 / self.bundle.control_rate_hz
        self.last_action = np.zeros(self.bundle.action_dim, dtype=np.float64)
        self.last_command = self.bundle.action.to_raw(self.last_action)
        self.last_observation: np.ndarray | None = None
        self.integrals = {i.name: np.zeros(i.dim) for i in self.bundle.integrators}
        # Inputs that are constants of the robot, not measurements: gravity's direction (the layout
        # projects it into the body frame) and the default joint pose a legged policy acts around.
        used = {k for t in self.bundle.observation for k in t.inputs}
        self.constants: dict[str, np.ndarray] = {}
        if "gravity_direction" in used:
            self.constants["gravity_direction"] = np.array([0.0, 0.0, -1.0])
        if "default_joint_position" in used and "default_joint_position" in self.bundle.extra:
            self.constants["default_joint_position"] = np.asarray(
                self.bundle.extra["default_joint_position"], dtype=np.float64
            )
        self.arm: ArmController | None = None
        if self.bundle.action.mode in ARM_ACTION_MODES:
            try:  # load_bundle checked this already; a bundle built in memory has not been
                self.arm = ArmController.from_bundle(self.bundle.action.mode, self.bundle.extra)
            except ValueError as e:
                raise BundleError(str(e)) from None
        self.plan: PlanExecutor | None = PlanExecutor(self.bundle.plan) if self.bundle.plan is not None else None
        self.plan_index = 0

    def _initial_state(self) -> dict[str, np.ndarray]:
        return {s.input: np.asarray(s.initial, dtype=np.float32)[None] for s in self.bundle.state}

    def reset(self) -> None:
        """Call when an episode (a flight) starts: clears the last action, the integrators and any recurrent
        state; an arm re-anchors its joint targets (and held TCP orientation) on the next measured joints."""
        self.state = self._initial_state()
        self.last_action = np.zeros(self.bundle.action_dim, dtype=np.float64)
        self.last_command = self.bundle.action.to_raw(self.last_action)
        self.hold_integrators()
        if self.arm is not None:
            self.arm.reset()
        if self.plan is not None:
            self.start_plan(self.plan_index)

    def start_plan(self, plan_index: int) -> None:
        """A plan-guided bundle: follow the bundle's plan `plan_index` from its first subgoal (an episode starts)."""
        if self.plan is None:
            raise ValueError("this bundle has no plan: it is not a plan-guided policy")
        self.plan_index = int(plan_index)
        self.plan = PlanExecutor(self.bundle.plan)
        self.plan.start(plan_index=self.plan_index)

    def hold_integrators(self) -> None:
        """Restart the integrators at zero: while something else holds the robot (a safety node's pre-arm checks),
        the error it cannot act on must not wind them up."""
        self.integrals = {i.name: np.zeros(i.dim) for i in self.bundle.integrators}

    def observation(self, raw: dict[str, np.ndarray], update: bool = False) -> np.ndarray:
        """The policy input. Inputs the caller provides (last_action, integrals) take precedence,
        so a simulator can replay exactly what its policy saw; update=True advances the integrators."""
        raw = self._with_tcp({**self.constants, **raw})
        raw.setdefault("last_action", self.last_action)
        for integ in self.bundle.integrators:
            if integ.name not in raw:
                if update:
                    self.integrals[integ.name] = integ.update(self.integrals[integ.name], raw, self.dt)
                raw[integ.name] = self.integrals[integ.name]
        if self.plan is not None and PLAN_FEATURES_INPUT not in raw:
            features = self._plan_for(raw).observe(raw, advance=update)
            raw[PLAN_FEATURES_INPUT] = features[0] if np.ndim(raw["ee_position"]) == 1 else features  # one robot
        return build_observation(self.bundle.observation, raw)

    def _with_tcp(self, raw: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """An arm reports its joints; the TCP pose is FK of them, as in training (unless raw has it already)."""
        if self.arm is not None and "joint_position" in raw and not {"ee_position", "ee_quaternion"} <= raw.keys():
            return {**self.arm.tcp_state(raw["joint_position"]), **raw}
        return raw

    def _plan_for(self, raw: dict[str, np.ndarray]) -> PlanExecutor:
        """The executor of as many robots as raw holds (a simulator's batch gets one of its own at its first call)."""
        n = np.asarray(raw["ee_position"]).reshape(-1, 3).shape[0]
        if self.plan.n != n:
            self.plan = PlanExecutor(self.bundle.plan, n)
            self.plan.start(plan_index=self.plan_index)
        return self.plan

    def policy_actions(
        self, raw: dict[str, np.ndarray], episode_start: np.ndarray | None = None, plan_index: np.ndarray | None = None
    ) -> np.ndarray:
        """What a simulator driving a batch of robots applies: policy-space actions (n, A) from raw state (batched),
        clipped to [-1, 1], the integrators left to the caller (raw carries them). A plan-guided bundle adds its
        plan's action: robots flagged in episode_start (n,) begin plan_index's plan (n,) first."""
        if self.plan is None:
            return np.clip(self.policy(self.observation(raw)).astype(np.float64), -1.0, 1.0)
        raw = self._with_tcp(raw)
        plan = self._plan_for(raw)
        if episode_start is not None:
            plan.start(np.asarray(episode_start, dtype=bool), 0 if plan_index is None else plan_index)
        residual = np.clip(self.policy(self.observation(raw, update=True)).astype(np.float64), -1.0, 1.0)
        return plan.action(raw, residual)

    def policy(self, obs: np.ndarray) -> np.ndarray:
        """Raw network output for a (batch, obs_dim) or (obs_dim,) float32 observation. A bundle with recurrent
        state runs one robot, one step a call: its state advances with each call (reset() restarts it)."""
        x = np.asarray(obs, dtype=np.float32)
        single = x.ndim == 1
        if not self.bundle.state:
            y = self.session.run(None, {self._input_name: x[None] if single else x})[0]
            return y[0] if single else y
        if not (single or x.shape[0] == 1):
            raise ValueError(f"this bundle keeps recurrent state for one robot: one observation a call, not {len(x)}")
        outs = self.session.run(self._output_names, {self._input_name: x.reshape(1, -1), **self.state})
        self.state = {s.input: v for s, v in zip(self.bundle.state, outs[1:], strict=True)}
        return outs[0][0] if single else outs[0]

    def act(self, raw: dict[str, np.ndarray]) -> np.ndarray:
        """One control step: returns what the robot's controller takes, in robot units.

        rpyt / ctbr / motors: the command itself (e.g. rpyt: deg, deg, deg/s, PWM). Arm modes: joint
        position targets, the arm's joints (rad) then each finger (m), from the command (kept in
        last_command) through the IK, integrated on the previous target and the measured joints.
        """
        obs = self.observation(raw, update=True)
        self.last_observation = obs  # what this action was computed from (replay checks, logging)
        a = np.clip(self.policy(obs).astype(np.float64), -1.0, 1.0)
        if not np.all(np.isfinite(a)):
            raise ValueError("policy produced a non-finite action")
        if self.plan is not None:  # the network's output is a residual on the plan's action
            a = self.plan.action(self._with_tcp(raw), a)[0]
        self.last_action = a
        self.last_command = self.bundle.action.to_raw(a)
        if self.arm is None:
            return self.last_command
        return self.arm.joint_targets(self.last_command, raw["joint_position"])
