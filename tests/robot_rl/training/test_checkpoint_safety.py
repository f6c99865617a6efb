"""Checkpoints are data and know their task (issue 24, items 4 and 5).

A crafted checkpoint (a pickle whose __reduce__ writes a file) given to the real CLI runs nothing and ends with
one line and exit code 2; older checkpoints convert once (--trust); a checkpoint of another task (crazyflie_goto
for a crazyflie_hover run) is refused by eval, export, init_from and algo.anchor; resume refuses a run whose
config.yaml task section was edited and says what it does with each override.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

from robot_rl.training.checkpoint import CheckpointError, latest_checkpoint, load_checkpoint

ROOT = Path(__file__).resolve().parents[3]
HOVER = ROOT / "tests" / "data" / "crazyflie_hover_ppo"


def run_cli(*args: str, module: str = "robot_rl.cli") -> subprocess.CompletedProcess:
    env = dict(os.environ, MUJOCO_GL="egl")
    return subprocess.run([sys.executable, "-m", module, *args], capture_output=True, text=True, cwd=ROOT, env=env)


def one_line_error(p: subprocess.CompletedProcess, *needles: str) -> str:
    assert p.returncode == 2, (p.returncode, p.stdout[-2000:], p.stderr[-2000:])
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in p.stderr, p.stderr
    for n in needles:
        assert n in lines[0], lines[0]
    return lines[0]


class WritesAFile:
    """Unpickling this calls exec, which writes the marker: what a malicious shared checkpoint does."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (exec, (f"open({str(self.marker)!r}, 'w').write('pwned')",))


def _run_dir(root: Path, checkpoint_obj=None, checkpoint_file: Path | None = None) -> Path:
    """A hover run directory (the committed policy's config) whose only checkpoint is the one given."""
    from robot_rl.config import load_config, to_yaml

    run = root / "run"
    (run / "checkpoints").mkdir(parents=True)
    cfg = load_config([f"runs_root={root}", "task.num_worlds=8", "eval.episodes=4"])
    (run / "config.yaml").write_text(to_yaml(cfg))
    if checkpoint_obj is not None:
        torch.save(checkpoint_obj, run / "checkpoints" / "model_1.pt")
    if checkpoint_file is not None:
        shutil.copy(checkpoint_file, run / "checkpoints" / "model_1.pt")
    return run


@pytest.mark.parametrize(
    "command", ["eval", *(pytest.param(c, marks=pytest.mark.slow) for c in ("export", "init_from", "anchor"))]
)
def test_crafted_checkpoint_runs_nothing_and_the_cli_exits_2(tmp_path, command):
    marker = tmp_path / "written_by_the_checkpoint"
    run = _run_dir(tmp_path, {"actor_state_dict": WritesAFile(marker), "iteration": 1})
    ckpt = run / "checkpoints" / "model_1.pt"
    train = ["train", f"runs_root={tmp_path}", "task.num_worlds=8", "train.iterations=1", "train.progress=false"]
    args = {
        "eval": ["eval", f"run={run}"],
        "export": ["export", f"run={run}"],
        "init_from": [*train, "run_name=fine", f"init_from={ckpt}"],
        "anchor": [*train, "run_name=anchored", f"algo.anchor={ckpt}", "algo.anchor_coef=1.0"],
    }[command]
    line = one_line_error(run_cli(*args), "model_1.pt", "refused, nothing in it was run", "exec")
    assert "convert_checkpoint" in line
    assert not marker.exists()
    # the payload is live: the torch.load(weights_only=False) checkpoints were read with before runs it
    torch.load(ckpt, weights_only=False)
    assert marker.read_text() == "pwned"


def test_a_plain_pickle_with_code_is_refused_too(tmp_path):
    import pickle

    marker = tmp_path / "marker"
    path = tmp_path / "model_1.pt"
    path.write_bytes(pickle.dumps({"actor_state_dict": WritesAFile(marker), "iteration": 1}, protocol=2))
    with pytest.raises(CheckpointError, match="nothing in it was run"):
        load_checkpoint(path)
    assert not marker.exists()


def _old_format(path: Path) -> None:
    """Rewrite a checkpoint as robot_rl wrote them before: numpy's RNG state as numpy data, no task record."""
    d = load_checkpoint(path)
    n = d["rng"]["numpy"]
    d["rng"]["numpy"] = (n["bit_generator"], n["key"].numpy().astype(np.uint32), n["pos"], n["has_gauss"],
                         n["cached_gaussian"])  # fmt: skip
    del d["task_record"]
    torch.save(d, path)


def test_old_checkpoint_is_refused_then_converted_once(tmp_path):
    old = tmp_path / "old" / "model.pt"
    old.parent.mkdir()
    shutil.copy(HOVER / "model.pt", old)
    shutil.copy(HOVER / "config.yaml", old.parent / "config.yaml")
    _old_format(old)
    before = torch.load(old, weights_only=False)
    with pytest.raises(CheckpointError, match=r"numpy\..*_reconstruct.*convert_checkpoint --trust"):
        load_checkpoint(old)
    new = tmp_path / "new.pt"
    refused = run_cli(str(old), str(new), module="robot_rl.training.convert_checkpoint")
    one_line_error(refused, "--trust", "pickle")
    assert not new.exists()
    p = run_cli("--trust", str(old), str(new), module="robot_rl.training.convert_checkpoint")
    assert p.returncode == 0, p.stderr
    assert "task crazyflie_hover (robot crazyflie_2_1), iteration 300" in p.stdout
    assert "--trust" in p.stderr  # it says that it used pickle, and why
    after = load_checkpoint(new)
    assert after["task_record"]["task"] == "crazyflie_hover" and len(after["task_record"]["config_hash"]) == 64
    for k, v in before["actor_state_dict"].items():
        assert torch.equal(after["actor_state_dict"][k], v), k
    from robot_rl.training.checkpoint import numpy_rng_from_plain

    got = numpy_rng_from_plain(after["rng"]["numpy"])
    assert got[0] == before["rng"]["numpy"][0] and np.array_equal(got[1], before["rng"]["numpy"][1])
    assert got[2:] == tuple(before["rng"]["numpy"][2:])


# -- another task's checkpoint, resume of an edited run ------------------------------------------------------------
TINY = ["task.num_worlds=8", "train.iterations=1", "algo.num_steps_per_env=8", "train.progress=false",
        "train.save_every=1"]  # fmt: skip


@pytest.fixture(scope="module")
def goto_run(tmp_path_factory) -> Path:
    """One real PPO iteration of crazyflie_goto on 8 worlds: its checkpoint has the hover policy's shapes."""
    from robot_rl import commands

    root = tmp_path_factory.mktemp("goto")
    (run,) = commands.cmd_train([f"runs_root={root}", "task=crazyflie_goto", "run_name=goto", *TINY])
    return run


def test_another_tasks_checkpoint_is_refused_by_eval_export_init_from_and_anchor(tmp_path, goto_run):
    from robot_rl import commands
    from robot_rl.config import load_config
    from robot_rl.envs import make_env
    from robot_rl.training.ppo_trainer import PPOTrainer

    goto_ckpt = latest_checkpoint(goto_run)
    hover_shapes = {k: v.shape for k, v in load_checkpoint(HOVER / "model.pt")["actor_state_dict"].items()}
    assert {k: v.shape for k, v in load_checkpoint(goto_ckpt)["actor_state_dict"].items()} == hover_shapes
    run = _run_dir(tmp_path, checkpoint_file=goto_ckpt)
    both = ("'crazyflie_goto'", "'crazyflie_hover'", "refused")
    one_line_error(run_cli("eval", f"run={run}"), *both)
    with pytest.raises(CheckpointError, match="of task 'crazyflie_goto'.*this run's task is 'crazyflie_hover'"):
        commands.export_run(run)
    assert not (run / "bundle").exists()
    hover = load_config([f"runs_root={tmp_path}", "run_name=fine", f"init_from={goto_ckpt}", *TINY])
    with pytest.raises(CheckpointError, match="of task 'crazyflie_goto'"):
        commands.train_one(hover)
    assert not list((tmp_path / "fine").glob("checkpoints/*.pt"))
    algo = {**dict(hover.algo), "anchor": str(goto_ckpt), "anchor_coef": 1.0}
    with pytest.raises(CheckpointError, match="of task 'crazyflie_goto'"):
        PPOTrainer(make_env(hover, num_worlds=4), algo)


def test_resume_refuses_an_edited_task_config_and_says_what_it_does_with_overrides(tmp_path, goto_run, capsys):
    from robot_rl import commands

    run = tmp_path / "goto"
    shutil.copytree(goto_run, run)
    commands.cmd_train([f"resume={run}", "train.iterations=2", "task.num_worlds=16", "seed=7", "resume_finished=true"])
    out = capsys.readouterr().out
    assert "resume: applying train.iterations=2" in out
    assert "resume: ignoring task.num_worlds=16: a resumed run keeps its config.yaml (task.num_worlds=8)" in out
    assert "resume: ignoring seed=7" in out
    assert latest_checkpoint(run).name == "model_2.pt"

    cfg_path = run / "config.yaml"
    original = cfg_path.read_text()
    edited = yaml.safe_load(original)
    edited["task"]["params"]["goal_period_s"] = 2.0  # a task option, not a run-time knob
    cfg_path.write_text(yaml.safe_dump(edited))
    one_line_error(
        run_cli("train", f"resume={run}", "train.iterations=3", "resume_finished=true"),
        "task section was edited",
        "resume refused",
    )
    edited = yaml.safe_load(original)
    edited["task"]["name"] = "crazyflie_hover"
    cfg_path.write_text(yaml.safe_dump(edited))
    one_line_error(
        run_cli("train", f"resume={run}", "train.iterations=3", "resume_finished=true"),
        "'crazyflie_hover'",
        "'crazyflie_goto'",
    )
    assert latest_checkpoint(run).name == "model_2.pt"  # nothing trained on the edited config
    cfg_path.write_text(original)  # num_worlds is how many copies run, not what the task is: it may change
    edited = yaml.safe_load(original)
    edited["task"]["num_worlds"] = 4
    cfg_path.write_text(yaml.safe_dump(edited))
    commands.cmd_train([f"resume={run}", "train.iterations=3", "resume_finished=true"])
    assert latest_checkpoint(run).name == "model_3.pt"


def test_convert_with_trust_still_runs_nothing(tmp_path):
    """--trust allows numpy's array globals only: a checkpoint with code in it is refused and its code never runs."""
    marker = tmp_path / "written_by_the_checkpoint"
    run = _run_dir(tmp_path, {"actor_state_dict": WritesAFile(marker), "iteration": 1})
    p = run_cli("--trust", str(run / "checkpoints" / "model_1.pt"), str(tmp_path / "new.pt"),
                module="robot_rl.training.convert_checkpoint")  # fmt: skip
    one_line_error(p, "refused")
    assert not marker.exists() and not (tmp_path / "new.pt").exists()
