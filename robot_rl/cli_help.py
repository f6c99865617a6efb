"""`robot-rl <verb> --help`, `robot-rl --version`, and the offscreen GL choice made before mujoco is imported.

A verb's help lists its own key=value options and the config keys it reads, each with its default (from the
composed default config) and its allowed values (from the config schema).
"""

from __future__ import annotations

import ctypes.util
import os
from dataclasses import dataclass


@dataclass(frozen=True)
class Verb:
    usage: str
    about: str
    options: tuple[tuple[str, str], ...] = ()  # the verb's own key=value options and what they do
    config: tuple[str, ...] = ()  # config sections and keys it reads (dotted prefixes)
    groups: bool = False  # whether task=, algo=, backend=, guidance= choose config groups


TRAINING = (
    "seed",
    "run_name",
    "runs_root",
    "resume",
    "resume_finished",
    "init_from",
    "logger",
    "train",
    "imitation",
    "task",
    "backend",
    "algo",
    "guidance",
)
VERBS = {
    "train": Verb(
        "train [-m] [key=value ...]",
        "Train a policy; -m sweeps comma-separated values (seed=0,1,2), one run each.",
        (
            ("resume=DIR", "continue a run from its latest checkpoint (train.iterations is the total)"),
            ("resume_finished=true", "with resume=: train a finished run further"),
            ("init_from=DIR|FILE", "a new run from a checkpoint's weights and optimizer; trains train.iterations more"),
            ("logger=wandb", "also a Weights & Biases run in offline mode under <run>/wandb (no network)"),
            ("hydra/launcher=NAME", "with -m: the sweep's Hydra launcher (basic, joblib, ray, submitit_slurm, ...)"),
        ),
        TRAINING,
        True,
    ),
    "demo": Verb(
        "demo [key=value ...]",
        "Train, evaluate, export, render, fly in SITL and index for the dashboard (the train options apply).",
        (),
        TRAINING,
        True,
    ),
    "imitate": Verb(
        "imitate [key=value ...]",
        "DAgger warm start from the task's scripted teacher, as its own run; then train init_from=<run>.",
        (),
        ("seed", "run_name", "runs_root", "task", "imitation"),
        True,
    ),
    "eval": Verb(
        "eval run=DIR [key=value ...]",
        "Evaluate a run's latest checkpoint on fixed seeds and record it in the store.",
        (
            ("run=DIR", "the run directory (required)"),
            ("checkpoint=FILE", "a checkpoint of the run instead of its latest"),
            ("bundle=true", "evaluate the exported ONNX bundle instead of the checkpoint"),
            (
                "policy=zero|corrected_plan",
                "zero actions (the plan alone for guidance=plan runs), or that with corrections",
            ),
            ("name=NAME", "a name for this evaluation"),
        ),
        ("eval",),
    ),
    "collect": Verb(
        "collect run=DIR [episodes=N] [policy=trained|zero|plan] [noise=STD] [out=PATH] [key=value ...]",
        "Record the run's policy acting in its task (success-labelled episodes) as prior data for algo=td3/sac.",
        (
            ("run=DIR", "the run directory (required)"),
            ("episodes=N", "episodes to record (default 64)"),
            (
                "policy=trained|zero|plan",
                "the run's policy (default), zero actions, or the plan controller "
                "(arm tasks in ee_position/ee_pose: demonstrations)",
            ),
            ("noise=STD", "Gaussian noise on the policy's actions, or the plan's residual (default 0)"),
            ("checkpoint=FILE", "a checkpoint instead of the latest"),
            (
                "plan_reads=simulator|perceived",
                "policy=plan: the controller reads the simulator's state (default) or the noisy state the learner sees",
            ),
            ("out=PATH", "the dataset (default DIR/datasets/<policy>_<episodes>.npz and .json)"),
        ),
    ),
    "play": Verb(
        "play run=DIR [key=value ...]",
        "Render a browser-playable mp4 of the policy into DIR/videos.",
        (
            ("run=DIR", "the run directory (required)"),
            ("checkpoint=FILE", "a checkpoint instead of the latest"),
            ("episode=N", "film episode N of a recorded evaluation, replayed exactly (videos/<eval>_episode_N.mp4)"),
            ("evaluation=NAME", "with episode=: which evaluation (default checkpoint_<eval.randomization>)"),
        ),
        ("play",),
    ),
    "export": Verb(
        "export run=DIR [checkpoint=FILE] [format=bundle|leapp]",
        "Write DIR/bundle: policy.onnx and policy.yaml, what the deploy runtime and the ROS nodes load (a "
        "plan-guided run's bundle carries its plan controller and plans).",
        (
            ("run=DIR", "the run directory (required)"),
            ("checkpoint=FILE", "a checkpoint instead of the latest"),
            ("format=bundle|leapp", "leapp: also DIR/leapp/<task>/, a LEAPP pipeline (Isaac Lab 3.0's deploy input)"),
        ),
    ),
    "import": Verb(
        "import PATH [robot=go1_like|crazyflie_2_1] [out=DIR] [rate_hz=HZ]",
        "A LEAPP pipeline (.yaml or its directory) or an mjlab ONNX export -> one of our bundles, mapped by joint "
        "and sensor names; anything that cannot be mapped is refused, each item named.",
        (
            ("PATH", "the pipeline YAML, its directory, or the .onnx file (required)"),
            ("robot=NAME", "go1_like or crazyflie_2_1 (default: the robot a LEAPP pipeline names, else go1_like)"),
            ("out=DIR", "the bundle directory (default: <PATH without suffix>_bundle beside it)"),
            ("rate_hz=HZ", "the control rate, where the source does not state it (mjlab ONNX)"),
        ),
    ),
    "replay": Verb(
        "replay log=FILE.mcap[,...] [params=sysid.yaml] [bundle=DIR [layout=N] [layout_seed=0]] "
        "[out=DIR | runs_root=DIR] [namespace=cf1]",
        "Replay a Crazyflie flight log in simulation: the logged commands open loop from logged states (error per "
        "axis after 0.1, 0.5 and 1 s), and with bundle= the policy closed loop from the log's start. An arm's or a "
        "quadruped's log replays open loop (TCP or trunk error per axis, and joint errors) and, with bundle=, closed "
        "loop through the safety node's target filter.",
        (
            ("log=FILE.mcap", "MCAP logs, comma-separated (required): a Crazyflie's, an arm's or a quadruped's"),
            ("params=sysid.yaml", "also replay under a robot-rl sysid fit, beside the nominal model"),
            (
                "bundle=DIR",
                "run this policy closed loop from the log's state under the logged goals, reach targets "
                "(arm) or velocity commands (quadruped); a pick-and-place bundle on the table of layout=",
            ),
            (
                "layout=N",
                "pick-and-place: the pool's layout the robot's table had (a plan-guided bundle follows plan N); the "
                "object starts at its logged pose",
            ),
            ("layout_seed=0", "pick-and-place: the seed of that pool (the run's task.params.layout_seed)"),
            ("out=DIR", "replay.json and replay.svg (default <runs_root>/sim2real/<log name>/: sim vs real's)"),
            ("runs_root=DIR", "the runs root the default out= is under (default runs, as for train)"),
            ("namespace=cf1", "the drone, when a log holds several"),
        ),
    ),
    "sysid": Verb(
        "sysid log=FILE.mcap[,...] [mass_kg=KG] [out=DIR | runs_root=DIR] [horizon_s=S] [namespace=cf1]",
        "Fit thrust coefficient, inertia, motor time constant and latency of the simulated Crazyflie to flight "
        "logs; joint damping, armature and servo stiffness of the simulated arm to joint_states + forward "
        "position controller logs; or motor strength, friction and payload of the simulated quadruped to "
        "joint_states + odom + joint_commands logs (the topics tell which), with mujoco.sysid; writes sysid.yaml "
        "(values, 95% intervals) and mujoco.sysid's report.html.",
        (
            ("log=FILE.mcap", "MCAP logs, comma-separated (required)"),
            ("mass_kg=KG", "Crazyflie: the weighed mass (default 0.027): logs alone cannot tell mass from thrust"),
            ("out=DIR", "where sysid.yaml and report.html go (default <runs_root>/sim2real/<log name>/)"),
            ("runs_root=DIR", "the runs root the default out= is under (default runs, as for train)"),
            ("horizon_s=S", "open-loop window length (default 0.5; arm 0.4, quadruped 0.2)"),
            ("max_iters=N", "least-squares iterations per latency (default 30)"),
            ("namespace=cf1", "the drone (or arm), when a log holds several"),
        ),
    ),
    "sitl": Verb(
        "sitl bundle=DIR [seconds=S] [ros=true|false] [out=FILE] [record=FILE.mcap] [physical=FILE.yaml] [layout=N]",
        "Fly a bundle in software-in-the-loop: the ROS 2 nodes over DDS when ROS 2 is installed, else in-process "
        "(an arm bundle: through the nodes, reaching, or picking and placing with its plan).",
        (
            ("bundle=DIR", "the bundle directory (required)"),
            ("seconds=S", "how long to fly (simulated seconds)"),
            ("ros=true|false", "force the ROS 2 graph on or off"),
            ("out=FILE", "write the flight's result as JSON"),
            ("record=FILE.mcap", "Crazyflie: fly goal steps (excitation) and record every topic to MCAP"),
            ("physical=FILE.yaml", "Crazyflie: parameters the simulated drone hides (mass_kg, thrust_scale, ...)"),
            ("layout=N", "a plan-guided arm bundle: the pick-and-place layout on the table, and its plan (default 0)"),
        ),
    ),
}


def _row(left: str, right: str) -> str:
    return f"  {left:<40}  {right}".rstrip()


def _config_lines(verb: Verb) -> list[str]:
    from robot_rl.config import CONFIG_DIR, load_config
    from robot_rl.schema import config_leaves, rule_for

    cfg = load_config([])
    lines = []
    if verb.groups:
        for group in ("task", "algo", "backend", "guidance"):
            if not any(p == group or p.startswith(group + ".") for p in verb.config):
                continue
            options = sorted(p.stem for p in (CONFIG_DIR / group).glob("*.yaml"))
            lines.append(_row(f"{group}=NAME", f"one of {', '.join(options)}"))
    for path, value in config_leaves(cfg):
        if not any(path == p or path.startswith(p + ".") for p in verb.config):
            continue
        rule = rule_for(cfg, path)
        lines.append(_row(f"{path} = {value!r}", rule.allowed() if rule is not None else ""))
    return lines


def verb_help(name: str) -> str:
    """The help text of one verb."""
    verb = VERBS[name]
    out = [f"usage: robot-rl {verb.usage}", "", verb.about]
    if verb.options:
        out += ["", "options:"] + [_row(k, v) for k, v in verb.options]
    if verb.config:
        out += ["", "config (key=value overrides; defaults shown):"] + _config_lines(verb)
    return "\n".join(out)


def version() -> str:
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as package_version

    try:
        return package_version("robot-rl")
    except PackageNotFoundError:
        return "unknown (not installed)"


def choose_gl_backend() -> str | None:
    """Without a display and without MUJOCO_GL, render offscreen: EGL if its library is there, else OSMesa.
    Must run before mujoco is imported (mujoco reads MUJOCO_GL once). Returns what was chosen, or None."""
    if os.environ.get("MUJOCO_GL") or os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"):
        return None
    backend = "egl" if ctypes.util.find_library("EGL") else "osmesa" if ctypes.util.find_library("OSMesa") else None
    if backend is not None:
        os.environ["MUJOCO_GL"] = backend
        os.environ.setdefault("PYOPENGL_PLATFORM", backend)
    return backend
