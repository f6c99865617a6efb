"""robot-rl: train, imitate, eval, play, export, sitl, dashboard, demo.

Arguments are Hydra-style overrides (key=value). Mistakes end with one line on stderr and exit
code 2; nothing is left half-written.
"""

from __future__ import annotations

import signal
import sys
import threading
from pathlib import Path

USAGE = """usage: robot-rl COMMAND [key=value ...]   (robot-rl COMMAND --help: its options; --version)

commands:
  train [-m] [overrides]     train a policy (e.g. task=crazyflie_hover seed=1 train.iterations=60);
                             -m sweeps comma-separated values (seed=0,1,2)
  imitate [overrides]        DAgger warm start from the task's CBF planner teacher (crazyflie_swarm);
                             imitation.rounds=8 ...; then train init_from=<its run directory>
  eval run=DIR [overrides]   evaluate the latest checkpoint (or bundle=true: the exported ONNX policy;
                             policy=zero: zero actions, i.e. the plan alone for a guidance=plan run;
                             policy=corrected_plan: the same with the options its training corrected)
  play run=DIR [episode=N]   render a browser-playable mp4 into DIR/videos (episode=: one evaluation episode)
  export run=DIR             write DIR/bundle/policy.onnx + policy.yaml (format=leapp: also DIR/leapp/)
  import PATH                a LEAPP pipeline or an mjlab ONNX export -> one of our bundles
  sitl bundle=DIR            fly a bundle in software-in-the-loop (ROS 2 nodes over DDS when available)
  replay log=FILE.mcap       a flight log replayed in simulation: open-loop error table, plots (bundle=: closed loop)
  sysid log=FILE.mcap        fit the simulator to a Crazyflie's or an arm's logs (mujoco.sysid); train on it with
                             task.params.sysid=<its sysid.yaml>
  deploy check BUNDLE        dry run against live ROS 2 topics: what would block arming
  dashboard [--port N]       serve the evaluation dashboard on 127.0.0.1
  demo [overrides]           train, evaluate, export, play, fly in SITL, index for the dashboard
"""


class UsageError(ValueError):
    pass


def _one_line(e: BaseException) -> str:
    return " ".join(str(e).split()) or type(e).__name__


def _fail(message: str, code: int = 2, prefix: str = "robot-rl: error: ", status: str = "failed") -> int:
    """Print the one error line, and mark any run this process began and did not finish as failed (or
    interrupted)."""
    print(f"{prefix}{message}", file=sys.stderr)
    try:
        from robot_rl.training.run_dir import fail_open_runs
    except ImportError:  # the base install: no run was started
        return code
    fail_open_runs(message, status)
    return code


def _interrupt(signum, frame) -> None:
    raise KeyboardInterrupt  # SIGTERM (a scheduler, `kill`) ends a run as Ctrl-C does: marked interrupted


def _check_store(url: str | None, source: str) -> None:
    """Open the store a command will write to before any work, so a bad URL costs no training run."""
    if not url:
        return
    from robot_rl.store import open_store

    try:
        open_store(url).close()
    except Exception as e:  # drivers raise their own types (sqlalchemy ArgumentError, OperationalError, ...)
        raise UsageError(f"{source}={url!r}: cannot open the store ({type(e).__name__}: {_one_line(e)})") from None


def _deploy_check(args: list[str]) -> int:
    import contextlib
    import io

    from robot_rl.ros_package import ros_function

    try:
        parse_args, check = ros_function("deploy_check_args"), ros_function("deploy_check")
    except ImportError as e:
        return _fail(f"deploy check needs the ROS 2 package (pip install ./ros_nodes): {e}")
    errors = io.StringIO()
    try:  # argparse prints its usage and error over two lines: keep the error line
        with contextlib.redirect_stderr(errors):
            parsed = parse_args(args)  # reads the bundle's robot from its policy.yaml
    except SystemExit as e:
        if not e.code:  # --help
            return 0
        lines = [ln for ln in errors.getvalue().splitlines() if ln.strip()]
        return _fail(f"deploy check: {lines[-1].split('error: ', 1)[-1] if lines else 'bad arguments'}")
    except (OSError, ValueError) as e:  # an unreadable or binary policy.yaml
        return _fail(f"deploy check: {args[0] if args else 'bundle'}: {type(e).__name__}: {_one_line(e)}")
    if not Path(parsed.bundle, "policy.yaml").is_file():  # a typo, not a bundle that would block arming
        return _fail(f"deploy check: no policy.yaml in {parsed.bundle}")
    from robot_rl.config import ConfigError
    from robot_rl.schema import DEPLOY_CHECK_RULES, check_options

    try:
        check_options(vars(parsed), DEPLOY_CHECK_RULES)
    except ConfigError as e:
        return _fail(f"deploy check: {e}")
    return check(args)


def _user_errors() -> tuple[type[BaseException], ...]:
    from robot_rl.config import ConfigError
    from robot_rl.deploy.bundle import BundleError
    from robot_rl.interop.errors import InteropError
    from robot_rl.store import StoreError
    from robot_rl.training.checkpoint import CheckpointError
    from sim.backends.mujoco_batch import ModelError

    # OSError: a path the user named cannot be read or written (missing, a directory, no permission);
    # UnicodeDecodeError: a file the user named is binary where text (YAML, JSON) belongs
    errors = (UsageError, ConfigError, BundleError, InteropError, CheckpointError, ModelError, StoreError, OSError)
    errors += (UnicodeDecodeError,)
    try:  # the guidance extra is optional
        from robot_rl.guidance.model_client import ModelError as ModelServerError
    except ImportError:
        return errors
    return (*errors, ModelServerError)


def main(argv: list[str] | None = None) -> int:
    """Run one command; bad input ends with one line on stderr and exit code 2, never a traceback."""
    import os

    from robot_rl.cli_help import choose_gl_backend

    choose_gl_backend()  # before anything imports mujoco
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _interrupt)
    try:
        return _main(list(sys.argv[1:] if argv is None else argv))
    except KeyboardInterrupt:
        return _fail("interrupted; the last checkpoint is intact", 130, prefix="robot-rl: ", status="interrupted")
    except Exception as e:  # a bug, not bad input: still one line (ROBOT_RL_DEBUG=1 shows the traceback)
        if os.environ.get("ROBOT_RL_DEBUG"):
            raise
        return _fail(f"internal error ({type(e).__name__}: {_one_line(e)}); ROBOT_RL_DEBUG=1 shows where", 1)


def _main(argv: list[str]) -> int:
    import os

    from robot_rl.cli_help import VERBS, verb_help, version

    if not argv or argv[0] in ("-h", "--help", "help"):
        print(USAGE)
        return _fail("no command given") if not argv else 0
    if argv[0] == "--version":
        print(f"robot-rl {version()}")
        return 0
    command, args = argv[0], argv[1:]
    if command in VERBS and any(a in ("-h", "--help") for a in args):
        print(verb_help(command))
        return 0
    if command == "deploy":
        if not args or args[0] != "check":
            return _fail("usage: robot-rl deploy check BUNDLE [options]")
        return _deploy_check(args[1:])
    try:
        errors = _user_errors()
    except ImportError as e:  # the base install has no simulator: say which extra to add
        return _fail(f"'{command}' needs the training extra (pip install 'robot-rl[train]'): {e}")
    try:
        if command == "dashboard":
            from robot_rl.dashboard.server import main as dashboard_main

            store = [a.split("=", 1)[1] for a in args if a.startswith("--store=")]
            store += [args[i + 1] for i, a in enumerate(args[:-1]) if a == "--store"]
            if store:
                _check_store(store[-1], "--store")
            else:
                _check_store(os.environ.get("ROBOT_RL_STORE"), "ROBOT_RL_STORE")
            return dashboard_main(args)
        from robot_rl import commands

        handler = getattr(commands, f"cmd_{command}", None)
        if handler is None:
            known = "train, imitate, eval, collect, play, export, import, sitl, replay, sysid, dashboard, demo"
            raise UsageError(f"unknown command '{command}' ({known})")
        if command not in ("sitl", "imitate", "import", "replay", "sysid"):  # the others index a run into the store
            _check_store(os.environ.get("ROBOT_RL_STORE"), "ROBOT_RL_STORE")
        handler(args)
        return 0
    except errors as e:
        return _fail(_one_line(e))
    except Exception as e:
        if type(e).__module__ == "mujoco" and type(e).__name__ == "FatalError":  # no GL context: how to get one
            return _fail(f"rendering failed ({_one_line(e)}); without a display set MUJOCO_GL=egl (or osmesa)")
        raise


if __name__ == "__main__":
    sys.exit(main())
