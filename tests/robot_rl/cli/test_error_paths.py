"""Every subcommand's bad-input paths: exit code 2, one line on stderr, no traceback, no run left "running".

Most cases call robot_rl.cli.main in-process (the same code as the console script, without a Python start
per case); one goes through the installed `robot-rl` entry point in a subprocess.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from robot_rl.cli import main

HAS_ROS = importlib.util.find_spec("robot_rl_ros") is not None and importlib.util.find_spec("rclpy") is not None


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    """Run directories as our commands write them (untrained checkpoints: no training needed), and broken ones."""
    from robot_rl.commands import export_run
    from robot_rl.config import load_config, to_yaml
    from robot_rl.envs import make_env
    from robot_rl.training.ppo_trainer import PPOTrainer

    root = tmp_path_factory.mktemp("runs")

    def make_run(name: str, *overrides: str) -> Path:
        cfg = load_config([f"runs_root={root}", *overrides])
        run = root / name
        run.mkdir()
        (run / "config.yaml").write_text(to_yaml(cfg))
        trainer = PPOTrainer(make_env(cfg, num_worlds=1), OmegaConf.to_container(cfg.algo, resolve=True))
        trainer.save(run / "checkpoints" / "model_0.pt")
        return run

    p = {"root": root, "hover": make_run("hover"), "arm": make_run("arm", "task=arm_reach")}
    export_run(p["hover"])
    p["bundle"] = root / "bundle"
    shutil.move(p["hover"] / "bundle", p["bundle"])
    p["badyaml"] = root / "badyaml"
    p["badyaml"].mkdir()
    (p["badyaml"] / "config.yaml").write_text("task: [\n")
    p["binyaml"] = root / "binyaml"
    p["binyaml"].mkdir()
    (p["binyaml"] / "config.yaml").write_bytes(bytes(range(128, 256)))
    p["listyaml"] = root / "listyaml"
    p["listyaml"].mkdir()
    (p["listyaml"] / "config.yaml").write_text("- 1\n- 2\n")
    p["badmeta"] = root / "badmeta"
    shutil.copytree(p["hover"], p["badmeta"])
    (p["badmeta"] / "meta.json").write_text("{")
    p["corrupt"] = root / "corrupt"
    shutil.copytree(p["hover"], p["corrupt"])
    (p["corrupt"] / "checkpoints" / "model_0.pt").write_bytes(b"\x80\x02garbage" * 100)
    p["binbundle"] = root / "binbundle"
    shutil.copytree(p["bundle"], p["binbundle"])
    (p["binbundle"] / "policy.yaml").write_bytes(bytes(range(128, 256)))
    p["yamlbundle"] = root / "yamlbundle"
    shutil.copytree(p["bundle"], p["yamlbundle"])
    (p["yamlbundle"] / "policy.yaml").write_text("observation: {terms: [\n")
    p["file"] = root / "a_file"
    p["file"].write_text("not a directory")
    return p


def running_runs(root: Path) -> list[Path]:
    out = []
    for meta in root.rglob("meta.json"):
        try:
            status = json.loads(meta.read_text()).get("status")
        except ValueError:
            continue  # the deliberately broken one
        if status == "running":
            out.append(meta.parent)
    return out


def assert_one_line_error(code: int, stderr: str, *needles: str) -> str:
    lines = [ln for ln in stderr.splitlines() if ln.strip()]
    assert code == 2, stderr
    assert len(lines) == 1, stderr
    assert "Traceback" not in stderr
    for n in needles:
        assert n in lines[0], lines[0]
    return lines[0]


# (argv with {placeholders} from the runs fixture, words the one line must contain)
CASES = {
    # no command, unknown command
    "none": ([], ["no command"]),
    "unknown": (["fly"], ["unknown command 'fly'"]),
    # train: the schema's ranges, types and keys
    "num_worlds": (["train", "task.num_worlds=0"], ["task.num_worlds=0", "an integer in [1, "]),
    "episode_length": (["train", "task.episode_length_s=0"], ["task.episode_length_s=0", "> 0"]),
    "save_every": (["train", "train.save_every=0"], ["train.save_every=0", ">= 1"]),
    "iterations": (["train", "train.iterations=-1"], ["train.iterations=-1", ">= 0"]),
    "iterations_type": (["train", "train.iterations=lots"], ["train.iterations", "int"]),
    "gamma": (["train", "algo.gamma=1.5"], ["algo.gamma=1.5", "[0, 1]"]),
    "probability_nan": (["train", "task.params.ground_start_prob=nan"], ["ground_start_prob=nan", "[0, 1]"]),
    "hidden_dims": (["train", "algo.actor_hidden_dims=[0,64]"], ["algo.actor_hidden_dims", ">= 1"]),
    "choice": (["train", "eval.randomization=extreme"], ["eval.randomization", "none, train, max"]),
    "plus_param": (["train", "+task.params.x=1"], ["unknown option 'task.params.x'", "ground_start_prob"]),
    "plus_reward": (["train", "+task.params.rewards.nope=1"], ["task.params.rewards.nope", "crash"]),
    "plus_reward_type": (["train", "+task.params.rewards.crash=abc"], ["task.params.rewards.crash", "float"]),
    "plus_key": (["train", "+task.foo=1"], ["unknown config key 'task.foo'"]),
    "not_key_value": (["train", "oops"], ["oops"]),
    "unknown_task": (["train", "task=crazyflie_hoover"], ["crazyflie_hoover", "crazyflie_hover"]),
    "sweep": (["train", "-m", "seed=0,1", "task.num_worlds=0"], ["task.num_worlds=0"]),
    "swarm_drones": (
        ["train", "task=crazyflie_swarm", "algo=ppo_swarm", "task.params.num_drones=0"],
        ["task.params.num_drones=0"],
    ),  # fmt: skip
    "resume_missing": (["train", "resume={root}/nope"], ["not a run directory"]),
    "init_from_missing": (["train", "init_from={root}/nope.pt"], ["init_from", "nope.pt"]),
    "runs_root_file": (["train", "runs_root={file}", "task.num_worlds=2"], ["a_file"]),
    # imitate
    "imitation_range": (["imitate", "imitation.learning_rate=-1"], ["imitation.learning_rate=-1", "> 0"]),
    "imitation_rounds": (["imitate", "imitation.rounds=0"], ["rounds"]),
    "imitation_unknown": (["imitate", "imitation.foo=1"], ["unknown imitation setting 'foo'"]),
    "imitation_type": (["imitate", "imitation.rounds=many"], ["imitation.rounds"]),
    "imitation_teacher": (["imitate", "task=arm_reach", "task.num_worlds=2"], ["no teacher"]),
    "imitation_config": (["imitate", "task.num_worlds=0"], ["task.num_worlds=0"]),
    # eval
    "eval_no_run": (["eval"], ["eval needs run="]),
    "eval_not_run": (["eval", "run={root}/nope"], ["not a run directory"]),
    "eval_yaml_error": (["eval", "run={badyaml}"], ["config.yaml is not a valid config"]),
    "eval_binary_yaml": (["eval", "run={binyaml}"], ["config.yaml is not a valid config"]),
    "eval_list_yaml": (["eval", "run={listyaml}"], ["not a robot_rl run config"]),
    "eval_episodes": (["eval", "run={hover}", "eval.episodes=0"], ["eval.episodes=0", ">= 1"]),
    "eval_unparsable": (["eval", "run={hover}", "eval.episodes=["], ["eval.episodes"]),
    "eval_choice": (["eval", "run={hover}", "eval.randomization=extreme"], ["eval.randomization"]),
    "eval_group": (["eval", "run={hover}", "task=crazyflie_goto"], ["task"]),
    "eval_unknown_key": (["eval", "run={hover}", "eval.nope=1"], ["unknown config key 'eval.nope'"]),
    "eval_policy": (["eval", "run={hover}", "policy=random"], ["'trained' (default), 'zero' or 'corrected_plan'"]),
    "eval_other_robot": (
        ["eval", "run={hover}", "eval.episodes=2", "checkpoint={arm}/checkpoints/model_0.pt"],
        ["arm_reach", "crazyflie_hover"],
    ),  # fmt: skip
    "eval_corrupt": (["eval", "run={corrupt}", "eval.episodes=2"], ["model_0.pt"]),
    "eval_no_bundle": (["eval", "run={hover}", "bundle=true", "eval.episodes=2"], ["policy.yaml"]),
    "eval_store_url": (["eval", "run={hover}"], ["ROBOT_RL_STORE", "notaurl://x"]),
    # play
    "play_no_run": (["play"], ["play needs run="]),
    "play_width": (["play", "run={hover}", "play.width=0"], ["play.width=0", "[16, 4096]"]),
    "play_seconds": (["play", "run={hover}", "play.seconds=-1"], ["play.seconds=-1", "> 0"]),
    "play_checkpoint": (["play", "run={hover}", "checkpoint={root}/nope.pt"], ["nope.pt"]),
    # export
    "export_no_run": (["export"], ["export needs run="]),
    "export_override": (["export", "run={hover}", "eval.episodes=2"], ["export takes run="]),
    "export_meta": (["export", "run={badmeta}"], ["meta.json is not valid JSON"]),
    "export_other_robot": (["export", "run={hover}", "checkpoint={arm}/checkpoints/model_0.pt"], ["arm_reach"]),
    # sitl
    "sitl_no_bundle": (["sitl"], ["sitl needs bundle="]),
    "sitl_seconds": (["sitl", "bundle={bundle}", "seconds=abc"], ["seconds='abc'", "(0, 3600]"]),
    "sitl_seconds_zero": (["sitl", "bundle={bundle}", "seconds=0"], ["seconds='0'"]),
    "sitl_ros": (["sitl", "bundle={bundle}", "ros=maybe"], ["ros='maybe'"]),
    "sitl_unknown": (["sitl", "bundle={bundle}", "speed=3"], ["speed="]),
    "sitl_missing": (["sitl", "bundle={root}/nope"], ["policy.yaml"]),
    "sitl_binary_yaml": (["sitl", "bundle={binbundle}", "ros=false"], []),
    "sitl_yaml_error": (["sitl", "bundle={yamlbundle}", "ros=false"], []),
    # deploy check (argparse and option ranges; the ROS graph part needs a robot)
    "deploy": (["deploy"], ["deploy check BUNDLE"]),
    "deploy_other": (["deploy", "run"], ["deploy check BUNDLE"]),
    "deploy_no_bundle_arg": (["deploy", "check"], ["bundle"]),
    "deploy_missing": (["deploy", "check", "{root}/nope"], ["no policy.yaml"]),
    "deploy_binary_yaml": (["deploy", "check", "{binbundle}"], ["binbundle"]),
    "deploy_type": (["deploy", "check", "{bundle}", "--seconds", "abc"], ["--seconds"]),
    "deploy_option": (["deploy", "check", "{bundle}", "--nope"], ["--nope"]),
    "deploy_seconds": (["deploy", "check", "{bundle}", "--seconds", "-1"], ["--seconds=-1", "> 0"]),
    "deploy_domain": (["deploy", "check", "{bundle}", "--domain-id", "999"], ["--domain-id=999", "232"]),
    "deploy_goal": (["deploy", "check", "{bundle}", "--goal", "0", "0", "nan"], ["--goal"]),
    # dashboard
    "dashboard_port": (["dashboard", "--runs-root", "{root}", "--port", "abc"], ["--port"]),
    "dashboard_port_range": (["dashboard", "--runs-root", "{root}", "--port", "70000"], ["70000"]),
    "dashboard_root": (["dashboard", "--runs-root", "{root}/nope"], ["not a directory"]),
    "dashboard_host": (["dashboard", "--runs-root", "{root}", "--host", "0.0.0.0"], ["--allow-public"]),
    "dashboard_store": (["dashboard", "--runs-root", "{root}", "--store", "notaurl://x"], ["--store", "notaurl"]),
    "dashboard_store_env": (["dashboard", "--runs-root", "{root}"], ["ROBOT_RL_STORE", "notaurl://x"]),
    # demo (train's validation comes first)
    "demo_iterations": (["demo", "train.iterations=-1"], ["train.iterations=-1"]),
    "demo_store_url": (["demo", "task.num_worlds=2"], ["ROBOT_RL_STORE"]),
}
STORE_URL_CASES = {"eval_store_url", "dashboard_store_env", "demo_store_url"}
ROS_CASES = {name for name in CASES if name.startswith("deploy_")}
# train-like commands get runs_root=<the fixture's root>, so that nothing lands in ./runs
ROOTED = ("train", "imitate", "demo")


@pytest.mark.parametrize("name", list(CASES))
def test_bad_input_is_one_line_and_exit_code_2(name, runs, capsys, monkeypatch):
    if name in ROS_CASES and not HAS_ROS:
        pytest.skip("deploy check needs the ROS 2 package")
    argv, needles = CASES[name]
    argv = [a.format(**runs) for a in argv]
    if argv and argv[0] in ROOTED and not any(a.startswith("runs_root=") for a in argv):
        argv.insert(1, f"runs_root={runs['root']}")
    if name in STORE_URL_CASES:
        monkeypatch.setenv("ROBOT_RL_STORE", "notaurl://x")
    else:
        monkeypatch.delenv("ROBOT_RL_STORE", raising=False)
    code = main(argv)
    assert_one_line_error(code, capsys.readouterr().err, *needles)
    assert running_runs(runs["root"]) == []


@pytest.mark.parametrize(
    "overrides, needles",
    [
        (["task.action_mode=sideways"], ["unknown action_mode 'sideways'"]),  # the task refuses it
        (["init_from={arm}"], ["arm_reach", "crazyflie_hover"]),  # a checkpoint of another robot
    ],
)
def test_errors_after_the_run_directory_exists_mark_it_failed(overrides, needles, runs, capsys):
    before = {p.parent for p in runs["root"].glob("*/meta.json")}
    argv = ["train", f"runs_root={runs['root']}", "task.num_worlds=2", *(o.format(**runs) for o in overrides)]
    line = assert_one_line_error(main(argv), capsys.readouterr().err, *needles)
    (new,) = {p.parent for p in runs["root"].glob("*/meta.json")} - before
    meta = json.loads((new / "meta.json").read_text())
    assert meta["status"] == "failed" and meta["error"] in line and meta["finished_at"]


def _entry_point(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    script = Path(sys.executable).with_name("robot-rl")
    cmd = [str(script)] if script.is_file() else [sys.executable, "-m", "robot_rl.cli"]
    full_env = {k: v for k, v in os.environ.items() if k != "ROBOT_RL_STORE"} | {"MUJOCO_GL": "egl", **(env or {})}
    return subprocess.run([*cmd, *args], capture_output=True, text=True, env=full_env, timeout=300)


def test_the_installed_entry_point_prints_one_line(runs):
    """The console script, not main() (one Python start: ~10 s here): a task option the task refuses, found
    after the run directory exists, is one line and leaves the run failed."""
    root = runs["root"] / "subprocess"
    p = _entry_point("train", f"runs_root={root}", "task.num_worlds=2", "task.action_mode=fortran")
    assert_one_line_error(p.returncode, p.stderr, "action_mode")
    (meta,) = root.glob("*/meta.json")
    assert json.loads(meta.read_text())["status"] == "failed"
