"""robot-rl: train, imitate, eval, play, export, sitl, dashboard, demo.

Arguments are Hydra-style overrides (key=value). Mistakes end with one line on stderr and exit
code 2; nothing is left half-written.
"""

from __future__ import annotations

import sys

USAGE = """usage: robot-rl COMMAND [key=value ...]

commands:
  train [-m] [overrides]     train a policy (e.g. task=crazyflie_hover seed=1 train.iterations=60);
                             -m sweeps comma-separated values (seed=0,1,2)
  imitate [overrides]        DAgger warm start from the task's CBF planner teacher (crazyflie_swarm);
                             imitation.rounds=8 ...; then train init_from=<its run directory>
  eval run=DIR [overrides]   evaluate the latest checkpoint (or bundle=true: the exported ONNX policy;
                             policy=zero: zero actions, i.e. the plan alone for a guidance=plan run;
                             policy=corrected_plan: the same with the options its training corrected)
  play run=DIR               render a browser-playable mp4 into DIR/videos
  export run=DIR             write DIR/bundle/policy.onnx + policy.yaml
  sitl bundle=DIR            fly a bundle in software-in-the-loop (ROS 2 nodes over DDS when available)
  deploy check BUNDLE        dry run against live ROS 2 topics: what would block arming
  dashboard [--port N]       serve the evaluation dashboard on 127.0.0.1
  demo [overrides]           train, evaluate, export, play, fly in SITL, index for the dashboard
"""


class UsageError(ValueError):
    pass


def _user_errors() -> tuple[type[BaseException], ...]:
    from robot_rl.config import ConfigError
    from robot_rl.deploy.bundle import BundleError
    from robot_rl.training.checkpoint import CheckpointError
    from sim.backends.mujoco_batch import ModelError

    errors = (UsageError, ConfigError, BundleError, CheckpointError, ModelError, FileNotFoundError)
    try:  # the guidance extra is optional
        from robot_rl.guidance.model_client import ModelError as ModelServerError
    except ImportError:
        return errors
    return (*errors, ModelServerError)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help", "help"):
        print(USAGE)
        return 0 if argv else 2
    command, args = argv[0], argv[1:]
    if command == "dashboard":
        from robot_rl.dashboard.server import main as dashboard_main

        return dashboard_main(args)
    if command == "deploy":
        if not args or args[0] != "check":
            print("robot-rl: error: usage: robot-rl deploy check BUNDLE [options]", file=sys.stderr)
            return 2
        try:
            from robot_rl_ros.deploy_check import main as deploy_check_main
        except ImportError as e:
            print(f"robot-rl: error: deploy check needs the ROS 2 package (pip install ./ros_nodes): {e}",
                  file=sys.stderr)  # fmt: skip
            return 2
        return deploy_check_main(args[1:])
    try:
        errors = _user_errors()
    except ImportError as e:  # the base install has no simulator: say which extra to add
        print(
            f"robot-rl: error: '{command}' needs the training extra (pip install 'robot-rl[train]'): {e}",
            file=sys.stderr,
        )
        return 2
    try:
        from robot_rl import commands

        handler = getattr(commands, f"cmd_{command}", None)
        if handler is None:
            raise UsageError(f"unknown command '{command}' (train, imitate, eval, play, export, sitl, dashboard, demo)")
        handler(args)
        return 0
    except errors as e:
        print(f"robot-rl: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("robot-rl: interrupted; the last checkpoint is intact", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
