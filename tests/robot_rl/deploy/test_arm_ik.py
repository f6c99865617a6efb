"""The deploy runtime's numpy arm IK is the simulator's torch IK: same FK, Jacobian and IK step, same
joint targets step by step on a real exported arm bundle, and a malformed ik section is refused by name."""

from __future__ import annotations

import copy
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

from robot_rl.deploy import BundleError, PolicyRuntime, load_bundle
from robot_rl.deploy import arm_ik as npik
from robot_rl.deploy.bundle import ActionSpec
from robot_rl.export.bundle_export import bundle_extra
from sim.robots import diff_ik as tik
from sim.tasks import make_task
from sim.tasks.arm import ACTION_SPECS

ROOT = Path(__file__).resolve().parents[3]
Q_LOW, Q_HIGH = np.array(tik.PANDA_Q_LOW), np.array(tik.PANDA_Q_HIGH)


def _spec(mode: str = "ee_pose") -> npik.IKSpec:
    return npik.IKSpec.from_dict(bundle_extra(make_task("arm_reach", action_mode=mode))["ik"])


def _random_q(rng: np.random.Generator, n: int) -> np.ndarray:
    return Q_LOW + (Q_HIGH - Q_LOW) * rng.random((n, 7))


def test_fk_jacobian_and_tcp_quaternion_match_simulator():
    spec, rng = _spec(), np.random.default_rng(0)
    q = _random_q(rng, 50)
    kt, kn = tik.forward_kinematics(torch.from_numpy(q)), npik.forward_kinematics(spec, q)
    assert np.abs(kn.flange - kt.flange.numpy()).max() < 1e-9
    assert np.abs(kn.tcp - kt.tcp.numpy()).max() < 1e-9
    jac = npik.tcp_jacobian(kn)
    assert np.abs(jac - tik.tcp_jacobian(kt).numpy()).max() < 1e-9
    quat = npik.quat_xyzw_from_rotmat(kn.tcp[:, :3, :3])
    assert np.abs(quat - tik.quat_xyzw_from_rotmat(kt.tcp[:, :3, :3]).numpy()).max() < 1e-9
    # the Jacobian is the derivative of the TCP pose: central differences, rotation via the small-angle error
    h = 1e-6
    for j in range(7):
        dq = np.zeros(7)
        dq[j] = h
        kp, km = npik.forward_kinematics(spec, q + dq), npik.forward_kinematics(spec, q - dq)
        dv = (kp.tcp[:, :3, 3] - km.tcp[:, :3, 3]) / (2 * h)
        dw = npik.orientation_error(kp.tcp[:, :3, :3], km.tcp[:, :3, :3]) / (2 * h)
        assert np.abs(dv - jac[:, :3, j]).max() < 1e-6
        assert np.abs(dw - jac[:, 3:, j]).max() < 1e-6


class _Backend:
    def __init__(self, qpos: np.ndarray):
        self.qpos = torch.from_numpy(qpos)


@pytest.mark.parametrize("mode", list(ACTION_SPECS))
def test_ik_step_matches_simulator_joint_targets(mode):
    """The sim task's own command() + joint_targets() against the runtime's command + ArmController, over
    three steps per state: previous-target integration, the max_target_lead clamp, clipped steps and limits."""
    n, rng = 256, np.random.default_rng(1)
    task = make_task("arm_reach", action_mode=mode)
    ctl = npik.ArmController.from_bundle(mode, bundle_extra(task))
    spec = ACTION_SPECS[mode]
    action = ActionSpec(mode, spec["names"], *(np.array(spec[k]) for k in ("offset", "scale", "low", "high")))
    q = _random_q(rng, n)
    near = rng.random(n) < 0.5  # half the states with one joint within 0.03 rad of a limit
    j = rng.integers(0, 7, n)
    at_high = rng.random(n) < 0.5
    q[near, j[near]] = np.where(at_high, Q_HIGH[j] - 0.03 * rng.random(n), Q_LOW[j] + 0.03 * rng.random(n))[near]
    q0 = q.copy()
    task.rot_ref = tik.forward_kinematics(torch.from_numpy(q0)).tcp[:, :3, :3]  # as reset_worlds sets it
    task.prev_ctrl = torch.cat([torch.from_numpy(q0), torch.full((n, 2), 0.04, dtype=torch.float64)], 1)
    dls_calls = []  # a step that hits a joint limit solves twice
    dls = ctl.ik._dls

    def counted_dls(*args):
        dls_calls.append(1)
        return dls(*args)

    ctl.ik._dls = counted_dls
    worst, clamped = 0.0, 0
    for step in range(3):
        a = rng.uniform(-1.5, 1.5, (n, len(action.names)))  # beyond [-1, 1]: both sides clip it
        if step:  # the servos lag or get pushed: measured joints off the previous target, often past the lead
            q = q + rng.normal(0.0, 0.08, q.shape)
            clamped += int((np.abs(task.prev_ctrl[:, :7].numpy() - q) > ctl.spec.max_target_lead).any(1).sum())
        task.backend = _Backend(q)
        expected = task.joint_targets(task.command(torch.from_numpy(np.clip(a, -1, 1)))).numpy()
        got = ctl.joint_targets(action.to_raw(a), q)
        worst = max(worst, float(np.abs(got - expected).max()))
        task.prev_ctrl = torch.from_numpy(expected)
    print(f"{mode}: max |numpy - torch| joint target {worst:.2e} rad over 3 x {n} steps")
    assert worst < 1e-9
    assert clamped > 0  # the lead clamp was exercised
    if mode != "joint":
        assert len(dls_calls) > 3  # the joint-limit re-solve was exercised (two DLS solves in a step)
    # one step of the bare solver with large commands (beyond the per-step clips) and rotation deltas
    qt = torch.from_numpy(_random_q(rng, n))
    d_pos, d_rot = torch.from_numpy(rng.normal(0, 0.1, (n, 3))), torch.from_numpy(rng.normal(0, 0.5, (n, 3)))
    ref = task.ik.solve(qt, tik.forward_kinematics(qt), d_pos, d_rot).numpy()
    got = ctl.ik.solve(qt.numpy(), npik.forward_kinematics(ctl.spec, qt.numpy()), d_pos.numpy(), d_rot.numpy())
    assert np.abs(got - ref).max() < 1e-9


# -- end to end on an exported arm bundle ------------------------------------------------------------------
@pytest.fixture(scope="module")
def arm_run(tmp_path_factory) -> Path:
    """A 1-iteration arm_reach run on 16 worlds (ee_position actions), exported: a real bundle, not a good policy."""
    from robot_rl import commands

    root = tmp_path_factory.mktemp("arm_runs")
    (run,) = commands.cmd_train([f"runs_root={root}", "task=arm_reach", "task.num_worlds=16", "train.iterations=1",
                                 "train.save_every=1", "train.progress=false", "run_name=arm", "seed=2"])  # fmt: skip
    commands.export_run(run)
    return run


def test_play_renders_an_arm_video(arm_run, capsys):
    from robot_rl import commands

    video = commands.play_run(arm_run, ["play.seconds=1.0", "play.width=160", "play.height=128"])  # `robot-rl play`
    assert video.read_bytes()[4:8] == b"ftyp" and video.stat().st_size > 2000
    err_cm = float(capsys.readouterr().out.split("final position error ")[1].split(" cm")[0])
    assert 0.0 < err_cm < 100.0  # the reach target's distance from the TCP, as the task reports it


def test_eval_with_arm_bundle_matches_torch_policy(arm_run):
    """`robot-rl eval bundle=true` on an arm run: the same episodes as the torch actor (same seed).

    The bundle path hands the env policy-space actions, so the env's own IK runs; the runtime's
    IK is held to the simulator's in the next test. ONNX and torch differ by float32 rounding only.
    """
    from robot_rl.commands import evaluate_run

    over = ["eval.episodes=16"]
    onnx = evaluate_run(arm_run, over, use_bundle=True)
    ref = evaluate_run(arm_run, over)
    err_onnx = np.array([e["position_error_m"] for e in onnx["per_episode"]])
    err_ref = np.array([e["position_error_m"] for e in ref["per_episode"]])
    print(f"bundle vs torch eval: max |position error difference| {np.abs(err_onnx - err_ref).max():.2e} m; "
          f"success {onnx['metrics']['success_rate']:.3f} vs {ref['metrics']['success_rate']:.3f}")  # fmt: skip
    assert [e["success"] for e in onnx["per_episode"]] == [e["success"] for e in ref["per_episode"]]
    assert np.abs(err_onnx - err_ref).max() < 1e-5


def test_runtime_joint_targets_match_simulator_step_by_step(arm_run):
    """runtime.act() (ONNX + numpy IK, state kept in the runtime) gives the joint targets the simulator
    sends its servos, step by step across an episode boundary; the env is driven by the runtime's actions."""
    from omegaconf import OmegaConf

    from robot_rl.envs import make_env

    cfg = OmegaConf.load(arm_run / "config.yaml")
    env = make_env(cfg, num_worlds=16, seed=9, obs_noise=False)  # the runtime sees the joints the sim IK uses
    runtime = PolicyRuntime(arm_run / "bundle")
    sent = []  # what the simulator's task hands its servos each step (copied: resets write into prev_ctrl)
    sim_targets = env.task.joint_targets

    def record(cmd: torch.Tensor) -> torch.Tensor:
        target = sim_targets(cmd)
        sent.append(target.clone())
        return target

    env.task.joint_targets = record
    env.reset()
    worst, resets = 0.0, 0
    for _ in range(env.max_episode_length + 5):
        raw = {k: v.numpy() for k, v in env.task.last_raw.items() if k not in ("ee_position", "ee_quaternion")}
        targets = runtime.act(raw)  # the runtime computes the TCP pose from the joints itself
        _, _, dones, _ = env.step(torch.from_numpy(runtime.last_action))
        worst = max(worst, float(np.abs(targets - sent[-1].numpy()).max()))
        if bool(dones.any()):
            assert bool(dones.all())  # evaluation worlds start together and time out together
            runtime.reset()
            resets += 1
    print(f"runtime vs simulator joint targets: max |difference| {worst:.2e} over {env.max_episode_length + 5} steps")
    assert resets == 1
    assert worst < 1e-9


# -- base install and validation ------------------------------------------------------------------------
def test_arm_ik_imports_no_torch_mujoco_or_sim():
    code = (
        "import sys\n"
        "for m in ('torch', 'mujoco', 'sim', 'rsl_rl', 'hydra', 'omegaconf'):\n"
        "    sys.modules[m] = None  # any import of these now fails\n"
        "import numpy as np\n"
        "from robot_rl.deploy import PolicyRuntime, load_bundle\n"
        "from robot_rl.deploy.arm_ik import ArmController\n"
        "spec = dict(kind='damped_least_squares', integrate_on='previous_target', dh_modified=[[0, 0.3, 0]] * 7,\n"
        "            flange_d=0.1, hand_yaw=0.0, tcp_d=0.1, q_low=[-2] * 7, q_high=[2] * 7, q_home=[0.1] * 7,\n"
        "            damping=0.05, max_pos_step=0.05, max_rot_step=0.3, max_joint_step=0.25, null_gain=0.05,\n"
        "            limit_margin=0.02, max_target_lead=0.1)\n"
        "ctl = ArmController.from_bundle('ee_pose', {'ik': spec, 'ik_orientation': 'delta',\n"
        "                                            'gripper': {'fingers': 2, 'open_m': 0.04}})\n"
        "out = ctl.joint_targets(np.full(7, 0.01), np.full(7, 0.2))\n"
        "assert out.shape == (9,) and np.all(np.isfinite(out)), out\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr


MALFORMED = {  # field -> (edit of the extra section, what the error must say)
    "ik": (lambda x: x.pop("ik"), "extra.ik is missing"),
    "ik.damping": (lambda x: x["ik"].pop("damping"), "extra.ik.damping is missing"),
    "ik.q_low": (lambda x: x["ik"].__setitem__("q_low", [0.0] * 6), "extra.ik.q_low must be a list of 7"),
    "ik.dh_modified": (lambda x: x["ik"].__setitem__("dh_modified", [[0.0, 0.3]] * 7), "extra.ik.dh_modified"),
    "ik.kind": (lambda x: x["ik"].__setitem__("kind", "jacobian_transpose"), "extra.ik.kind"),
    "ik.max_target_lead": (lambda x: x["ik"].__setitem__("max_target_lead", "0.1"), "extra.ik.max_target_lead"),
    "ik.integrate_on": (lambda x: x["ik"].pop("integrate_on"), "extra.ik.integrate_on is missing"),
    "ik_orientation": (lambda x: x.__setitem__("ik_orientation", "delta"), "extra.ik_orientation"),
    "gripper.open_m": (lambda x: x["gripper"].pop("open_m"), "extra.gripper.open_m is missing"),
}


def _sealed(doc: dict) -> dict:
    """doc with the integrity hash an export would write (over its claimed ONNX sha256)."""
    from robot_rl.deploy.bundle import integrity_hash

    doc = yaml.safe_load(yaml.safe_dump(doc))
    return {**doc, "integrity": {"sha256": integrity_hash(doc, doc["onnx"]["sha256"])}}


@pytest.mark.parametrize("field", list(MALFORMED))
def test_malformed_ik_section_is_refused_naming_the_field(tmp_path, field):
    edit, message = MALFORMED[field]
    task = make_task("arm_reach", action_mode="ee_position")
    spec = ACTION_SPECS["ee_position"]
    doc = {
        "schema_version": 2, "robot": "panda_like", "task": "arm_reach", "control_rate_hz": 25.0,
        "observation": {"terms": task.obs_layout},
        "action": {"mode": "ee_position", **{k: spec[k] for k in ("names", "offset", "scale", "low", "high")}},
        "onnx": {"file": "policy.onnx", "sha256": "0" * 64},
        "extra": bundle_extra(task),
    }  # fmt: skip
    (tmp_path / "policy.yaml").write_text(yaml.safe_dump(_sealed(doc)))
    load_bundle(tmp_path, check_onnx=False)  # the unedited section loads
    bad = copy.deepcopy(doc)
    edit(bad["extra"])
    (tmp_path / "policy.yaml").write_text(yaml.safe_dump(_sealed(bad)))  # a valid hash: the IK check refuses it
    with pytest.raises(BundleError, match=message.replace(".", r"\.")):
        load_bundle(tmp_path, check_onnx=False)
