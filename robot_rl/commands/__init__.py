"""The work behind each robot-rl command, one module per verb. Each cmd_* takes the command's arguments
(key=value); robot_rl.cli dispatches to them by name."""

from robot_rl.commands.collect import cmd_collect, collect_run
from robot_rl.commands.demo import cmd_demo
from robot_rl.commands.evaluate import EVAL_POLICIES, cmd_eval, evaluate_run
from robot_rl.commands.export import cmd_export, export_run
from robot_rl.commands.imitate import cmd_imitate, imitate_one
from robot_rl.commands.import_policy import cmd_import
from robot_rl.commands.play import cmd_play, play_run
from robot_rl.commands.replay import cmd_replay
from robot_rl.commands.sitl import cmd_sitl
from robot_rl.commands.sysid import cmd_sysid
from robot_rl.commands.train import attach_guidance, cmd_train, guidance_name, reward_name, train_one

__all__ = [
    "EVAL_POLICIES",
    "attach_guidance",
    "cmd_collect",
    "collect_run",
    "cmd_demo",
    "cmd_eval",
    "cmd_export",
    "cmd_imitate",
    "cmd_import",
    "cmd_play",
    "cmd_replay",
    "cmd_sitl",
    "cmd_sysid",
    "cmd_train",
    "evaluate_run",
    "export_run",
    "guidance_name",
    "imitate_one",
    "play_run",
    "reward_name",
    "train_one",
]
