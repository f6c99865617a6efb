"""robot-rl train -m ... hydra/launcher=<name>: sweeps handed to Hydra's launcher plugins (robot_rl.commands.sweep)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from robot_rl import commands
from robot_rl.config import ConfigError

TINY = ["task.num_worlds=16", "train.iterations=2", "train.progress=false", "algo.num_steps_per_env=8"]


@pytest.mark.slow
def test_a_two_seed_sweep_on_a_local_ray_cluster_lands_both_runs_in_the_store(tmp_path):
    """Hydra's Ray launcher starts a Ray cluster on the loopback, each job trains a run in a Ray worker, and both
    runs are in the evaluation store (in a subprocess: the cluster's processes end with its driver)."""
    from robot_rl.store import open_store

    runs = tmp_path / "runs"
    args = ["-m", "seed=0,1", "hydra/launcher=ray", f"runs_root={runs}", f"hydra.sweep.dir={tmp_path / 'sweep'}",
            "+hydra.launcher.ray.init.num_cpus=2", *TINY]  # fmt: skip
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0", "OMP_NUM_THREADS": "1"}
    cli = Path(sys.executable).with_name("robot-rl")
    res = subprocess.run([str(cli), "train", *args], env=env, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    run_dirs = sorted(p for p in runs.iterdir() if p.is_dir())
    assert [json.loads((d / "meta.json").read_text())["seed"] for d in run_dirs] == [0, 1]
    for d in run_dirs:
        meta = json.loads((d / "meta.json").read_text())
        assert meta["status"] == "finished" and meta["total_steps"] == 2 * 16 * 8
    store = open_store(runs_root=runs)
    try:
        for d in run_dirs:
            assert store.get_run(d.name) is not None, d.name
    finally:
        store.close()
    assert (tmp_path / "sweep" / "multirun.yaml").is_file()  # Hydra's own record of the sweep
    assert (res.stdout + res.stderr).count("(_run_job pid=") >= 2  # Ray's prefix: the jobs ran in Ray's workers
    # the loopback settings hold beside a given ray.init option (num_cpus): no dashboard (Ray names its URL otherwise)
    assert "Started a local Ray instance" in res.stderr and "View the dashboard" not in res.stdout + res.stderr


def test_a_slurm_sweep_renders_its_array_job_where_there_is_no_cluster(tmp_path, monkeypatch):
    """Without srun nothing is submitted: the array job submitit would hand to sbatch is written and named."""
    monkeypatch.setenv("PATH", str(Path(sys.executable).parent))  # no srun/sbatch on this PATH, whatever the host
    sweep = tmp_path / "sweep"
    args = ["-m", "seed=0,1,2", "hydra/launcher=submitit_slurm", f"runs_root={tmp_path / 'runs'}",
            f"hydra.sweep.dir={sweep}", "hydra.launcher.partition=gpu", "hydra.launcher.gpus_per_node=1",
            "hydra.launcher.timeout_min=90", "hydra.launcher.mem_gb=16", *TINY]  # fmt: skip
    with pytest.raises(ConfigError, match="no SLURM on this machine") as e:
        commands.cmd_train(args)
    script = sweep / "slurm_array.sh"
    assert str(script) in str(e.value)
    text = script.read_text()
    for line in ("#SBATCH --array=0-2%3", "#SBATCH --partition=gpu", "#SBATCH --gpus-per-node=1",
                 "#SBATCH --time=90", "#SBATCH --mem=16GB", "#SBATCH --signal=USR2@120"):  # fmt: skip
        assert line in text, (line, text)
    assert f"{sys.executable} -u -m submitit.core._submit {sweep}/.submitit/%j" in text, text
    assert not (tmp_path / "runs").exists()  # no job ran here


def test_the_basic_launcher_trains_each_combination_in_this_process(tmp_path, capsys):
    runs = commands.cmd_train(
        ["-m", "seed=3,4", "hydra/launcher=basic", f"runs_root={tmp_path}", f"hydra.sweep.dir={tmp_path / 's'}", *TINY]
    )
    assert [json.loads((r / "meta.json").read_text())["seed"] for r in runs] == [3, 4]
    assert capsys.readouterr().out.count("training wall time") == 2


@pytest.mark.parametrize(
    "args, message",
    [
        (["-m", "seed=0,1", "hydra/launcher=slurm"], "hydra/launcher=slurm: one of basic, joblib, ray"),
        (["-m", "seed=0,1", "hydra/launcher=ray", "train.iterations=lots"], "train.iterations: expected int"),
        (["hydra.launcher.partition=gpu"], "Hydra's settings apply to a launched sweep"),
        (["-m", "seed=0,1", "hydra.sweep.dir=x"], "Hydra's settings apply to a launched sweep"),
    ],
)
def test_bad_sweeps_are_refused_before_any_job_starts(tmp_path, args, message):
    with pytest.raises(ConfigError, match=message):
        commands.cmd_train([*args, f"runs_root={tmp_path / 'runs'}"])
    assert not (tmp_path / "runs").exists()
