"""One PPO run across 2 processes started by torchrun, on CPU with gloo (robot_rl.training.distributed)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from robot_rl import commands
from robot_rl.config import ConfigError
from robot_rl.training.checkpoint import load_checkpoint, read_data
from robot_rl.training.distributed import Ranks, ranks_from_env


def torchrun(args: list[str], cwd: Path, timeout: float = 240) -> subprocess.CompletedProcess:
    """python -m torch.distributed.run --standalone --nproc_per_node 2 <args> (the rendezvous on localhost)."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MUJOCO_GL": os.environ.get("MUJOCO_GL", "egl")}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2", *args]
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


@pytest.mark.slow
def test_two_ranks_train_one_run_that_rank_0_writes(tmp_path):
    res = torchrun(
        ["-m", "robot_rl.cli", "train", f"runs_root={tmp_path}", "run_name=ddp", "task.num_worlds=32",
         "train.iterations=3", "train.progress=false", "algo.num_steps_per_env=8"],
        cwd=tmp_path,
    )  # fmt: skip
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    assert [p.name for p in tmp_path.iterdir() if p.is_dir()] == ["ddp"]  # one run directory, rank 0's
    assert res.stdout.count("run: ") == 1 and "32 worlds per rank, 2 ranks" in res.stdout, res.stdout
    meta = json.loads((tmp_path / "ddp" / "meta.json").read_text())
    assert meta["status"] == "finished" and meta["ranks"] == 2
    assert meta["total_steps"] == 2 * 32 * 8 * 3  # both ranks' worlds count
    ckpt = load_checkpoint(tmp_path / "ddp" / "checkpoints" / "model_3.pt")
    assert ckpt["iteration"] == 3 and ckpt["total_steps"] == 2 * 32 * 8 * 3
    # every update ended with the ranks' networks compared bitwise (check_in_sync raises otherwise, and the run
    # fails): the normalizer statistics and the gradients were averaged, the initial networks broadcast


@pytest.mark.slow
def test_two_ranks_train_one_td3_run(tmp_path):
    """TD3 across ranks: each rank its own replay, the critic's and actor's gradients averaged before each step."""
    fast = ["task.num_worlds=16", "train.iterations=2", "algo.steps_per_iteration=8", "algo.batch_size=128",
            "algo.learning_starts=64", "algo.actor_hidden_dims=[32,32]", "algo.critic_hidden_dims=[32,32]",
            "train.progress=false"]  # fmt: skip
    res = torchrun(
        ["-m", "robot_rl.cli", "train", f"runs_root={tmp_path}", "run_name=td3", "algo=td3", *fast], cwd=tmp_path
    )
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    meta = json.loads((tmp_path / "td3" / "meta.json").read_text())
    assert meta["status"] == "finished" and meta["ranks"] == 2 and meta["total_steps"] == 2 * 16 * 8 * 2
    ckpt = load_checkpoint(tmp_path / "td3" / "checkpoints" / "model_2.pt")
    assert ckpt["updates"] > 0  # updates ran, each ending in equal networks on both ranks (or the run fails)


@pytest.mark.slow
def test_the_sync_check_names_a_rank_whose_networks_drifted(tmp_path):
    """The check the run relies on fails when one value of one rank differs by one float32 step."""
    script = tmp_path / "drift.py"
    script.write_text(
        textwrap.dedent(
            """
            import torch
            from robot_rl.training import distributed

            ranks = distributed.ranks_from_env()
            distributed.start(ranks)
            torch.manual_seed(0)
            net = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.LayerNorm(8))
            distributed.check_in_sync([net], "the start")  # equal: no error
            if ranks.rank == 1:
                with torch.no_grad():
                    w = net[0].weight
                    w[2, 3] = torch.nextafter(w[2, 3], torch.tensor(1.0))
            try:
                distributed.check_in_sync([net], "the nudge")
                said = "in sync"
            except RuntimeError as e:
                said = str(e)
            with open(f"rank{ranks.rank}.txt", "w") as f:  # a file each: the ranks' stdout lines can interleave
                f.write(said)
            distributed.stop()
            """
        )
    )
    res = torchrun([str(script)], cwd=tmp_path)
    assert res.returncode == 0, res.stderr[-3000:]
    for rank in (0, 1):  # every rank learns it, so none waits forever at the next collective
        said = (tmp_path / f"rank{rank}.txt").read_text()
        assert "the ranks' networks differ after the nudge: ranks [1] from rank 0" in said, (rank, said)


def test_ranks_come_from_torchruns_variables():
    assert ranks_from_env({}) == Ranks(0, 0, 1) and not Ranks().distributed
    ranks = ranks_from_env({"WORLD_SIZE": "4", "RANK": "3", "LOCAL_RANK": "1"})
    assert ranks.distributed and not ranks.is_main
    assert ranks.rsl_rl_config() == {"global_rank": 3, "local_rank": 1, "world_size": 4}
    for bad in ({"WORLD_SIZE": "2", "RANK": "2"}, {"WORLD_SIZE": "two"}, {"WORLD_SIZE": "0"}):
        with pytest.raises(ValueError):
            ranks_from_env(bad)


def test_each_rank_of_a_gpu_run_takes_its_own_gpu():
    from robot_rl.training.distributed import Ranks, rank_device

    assert [rank_device("cuda", Ranks(r, r, 2)) for r in (0, 1)] == ["cuda:0", "cuda:1"]
    assert rank_device("cuda", Ranks(3, 1, 4)) == "cuda:1"  # the second GPU of the second machine
    assert rank_device("cuda:2", Ranks(1, 1, 2)) == "cuda:2" and rank_device("cpu", Ranks(1, 1, 2)) == "cpu"
    assert rank_device("cuda", Ranks()) == "cuda"


def test_what_a_torchrun_run_cannot_do_is_refused_before_anything_starts(tmp_path, monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "0")
    with pytest.raises(ConfigError, match="train.warm_start=dagger.* torchrun run"):
        commands.cmd_train([f"runs_root={tmp_path}", "run_name=r", "train.warm_start=dagger"])
    assert not (tmp_path / "r").exists()


@pytest.mark.slow
def test_a_torchrun_run_resumes_on_as_many_ranks_each_with_its_own_streams(tmp_path):
    common = ["task.num_worlds=32", "train.progress=false", "algo.num_steps_per_env=8", "train.save_every=1"]
    res = torchrun(["-m", "robot_rl.cli", "train", f"runs_root={tmp_path}", "run_name=ddp", "train.iterations=2",
                    *common], cwd=tmp_path)  # fmt: skip
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    run = tmp_path / "ddp"
    saved = load_checkpoint(run / "checkpoints" / "model_2.pt")
    env0, env1 = (r["env"] for r in saved["rank_rngs"])  # rank 0 saved both ranks' streams
    assert not torch.equal(env0, env1) and torch.equal(env0, saved["rng"]["env"])
    with pytest.raises(ConfigError, match=r"trained on 2 rank\(s\), this run has 1: resume it with torchrun"):
        commands.cmd_train([f"resume={run}", "train.iterations=4", "resume_finished=true"])
    res = torchrun(["-m", "robot_rl.cli", "train", f"resume={run}", "train.iterations=4", "resume_finished=true"],
                   cwd=tmp_path)  # fmt: skip
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    assert res.stdout.count("resuming ") == 1, res.stdout  # rank 0 speaks
    meta = json.loads((run / "meta.json").read_text())
    assert meta["status"] == "finished" and meta["total_steps"] == 2 * 32 * 8 * 4
    assert load_checkpoint(run / "checkpoints" / "model_4.pt")["iteration"] == 4
    # a fine-tune from it on 2 ranks: every rank starts from its weights (else the first update's check fails)
    res = torchrun(["-m", "robot_rl.cli", "train", f"runs_root={tmp_path}", "run_name=ft", f"init_from={run}",
                    "train.iterations=1", *common], cwd=tmp_path)  # fmt: skip
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    assert json.loads((tmp_path / "ft" / "meta.json").read_text())["status"] == "finished"


@pytest.mark.slow
def test_a_torchrun_td3_run_resumes_each_ranks_replay_ring_and_streams(tmp_path):
    """Every rank saves its own replay ring beside rank 0's checkpoint (with every rank's RNG streams); resumed on 2
    ranks, each rank restores its own ring: at the next save each ring holds its saved transitions, oldest first,
    followed by the new ones. (The envs restart from fresh episodes on resume, as in one process.)"""
    fast = ["task.num_worlds=16", "algo.steps_per_iteration=8", "algo.batch_size=128", "algo.learning_starts=64",
            "algo.actor_hidden_dims=[32,32]", "algo.critic_hidden_dims=[32,32]", "train.progress=false",
            "train.save_every=1", "backend.nthread=1"]  # fmt: skip
    res = torchrun(["-m", "robot_rl.cli", "train", f"runs_root={tmp_path}", "run_name=td3", "algo=td3",
                    "train.iterations=2", *fast], cwd=tmp_path)  # fmt: skip
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    checkpoints = tmp_path / "td3" / "checkpoints"
    saved = [read_data(checkpoints / name) for name in ("replay.pt", "replay_rank1.pt")]
    assert all(r["iteration"] == 2 and r["buffer"]["filled"] == 2 * 8 for r in saved)
    assert not torch.equal(saved[0]["buffer"]["data"]["obs"], saved[1]["buffer"]["data"]["obs"])  # each its own
    assert len(load_checkpoint(checkpoints / "model_2.pt")["rank_rngs"]) == 2
    res = torchrun(["-m", "robot_rl.cli", "train", f"resume={tmp_path / 'td3'}", "train.iterations=3",
                    "resume_finished=true"], cwd=tmp_path)  # fmt: skip
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    assert res.stdout.count("replay buffer: 256 transitions restored") == 2, res.stdout  # both ranks, 16 x 16
    for before, name in zip(saved, ("replay.pt", "replay_rank1.pt"), strict=True):
        after = read_data(checkpoints / name)
        assert after["iteration"] == 3 and after["buffer"]["filled"] == 3 * 8
        for k, v in before["buffer"]["data"].items():
            assert torch.equal(after["buffer"]["data"][k][: 2 * 8], v), (name, k)
