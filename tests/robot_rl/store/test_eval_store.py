"""Evaluation store: schema/migrations, recording, indexing run directories, concurrency."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from robot_rl.store import (
    SCHEMA_VERSION,
    Store,
    StoreError,
    index_run,
    index_runs_root,
    mean_ci95,
    mean_ci95_from_sums,
    open_store,
    wilson_ci95,
)
from robot_rl.store import schema as schema_mod
from robot_rl.store.validate import evaluation_problem

REPO = Path(__file__).resolve().parents[3]


def evaluation(name: str, n: int, k: int, **extra: object) -> dict:
    return {
        "name": name,
        "task": "crazyflie_hover",
        "episodes": n,
        "randomization": "train",
        "seed": 7,
        "metrics": {"success_rate": k / n, "position_error_m": 0.04, "crash_rate": 0.0, "extra": 1.5},
        "reward_terms": {"position": 1.0, "action_rate": -0.1},
        "per_episode": [
            {
                "episode": i,
                "success": i < k,
                "return": float(i),
                "position_error_m": 0.01,
                "crashed": False,
                "note": "x",
            }
            for i in range(n)
        ],
        **extra,
    }


def write_run(root: Path, name: str, *, seed: int = 1, success: float = 0.5, evaluated: bool = True) -> Path:
    run = root / name
    (run / "eval").mkdir(parents=True)
    (run / "videos").mkdir()
    (run / "config.yaml").write_text(f"task:\n  name: crazyflie_hover\nalgo:\n  name: ppo\nseed: {seed}\n")
    meta = {
        "run_name": name,
        "task": "crazyflie_hover",
        "algo": "ppo",
        "reward": "dense",
        "guidance": "none",
        "seed": seed,
        "git_revision": "deadbeef",
        "versions": {"torch": "2.13.0"},
        "status": "finished",
        "started_at": "2026-01-01T00:00:00Z",
        "finished_at": "2026-01-01T01:00:00Z",
        "train_wall_time_s": 12.5,
    }
    (run / "meta.json").write_text(json.dumps(meta))
    if evaluated:
        (run / "eval" / "final.json").write_text(json.dumps(evaluation("final", 10, int(success * 10))))
    (run / "videos" / "a.mp4").write_bytes(b"\x00" * 10)
    return run


def test_schema_wal_and_default_location(tmp_path: Path) -> None:
    store = open_store(runs_root=tmp_path)
    assert store.path == tmp_path / "eval_store.sqlite"
    assert store.schema_version() == SCHEMA_VERSION
    conn = sqlite3.connect(store.path)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    conn.close()
    store.close()
    # Reopening an up-to-date store changes nothing.
    assert open_store(runs_root=tmp_path).schema_version() == SCHEMA_VERSION


def test_migration_applies_once_and_refuses_newer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "s.sqlite"
    Store(path).close()
    extra = ["ALTER TABLE runs ADD COLUMN notes TEXT"]
    monkeypatch.setattr(schema_mod, "MIGRATIONS", [*schema_mod.MIGRATIONS, extra])
    store = Store(path)
    assert store.schema_version() == SCHEMA_VERSION + 1
    store.record_run("r")
    assert "notes" in store.query("SELECT * FROM runs")[0]
    store.close()
    Store(path).close()  # second open must not re-run the ALTER (it would fail)
    monkeypatch.setattr(schema_mod, "MIGRATIONS", schema_mod.MIGRATIONS[:1])
    with pytest.raises(StoreError, match="newer"):
        Store(path)


def test_record_run_and_evaluation(tmp_path: Path) -> None:
    store = Store(tmp_path / "s.sqlite")
    store.record_run("r1", task="crazyflie_hover", algo={"name": "ppo"}, seed="3", versions={"torch": "2"})
    store.record_run("r1", status="finished")  # partial update keeps earlier fields
    store.record_evaluation("r1", evaluation("final", 20, 15))
    store.record_evaluation("r1", evaluation("final", 10, 5))  # re-recording replaces episodes
    run = store.get_run("r1")
    assert run["task"] == "crazyflie_hover" and run["algo"] == "ppo" and run["seed"] == 3
    assert run["status"] == "finished" and run["versions"] == {"torch": "2"}
    (ev,) = run["evaluations"]
    assert ev["episodes"] == 10 and ev["success_rate"] == 0.5
    lo, hi = wilson_ci95(5, 10)
    assert ev["success_lo"] == pytest.approx(lo) and ev["success_hi"] == pytest.approx(hi)
    assert ev["metrics"]["extra"] == 1.5 and ev["reward_terms"]["position"] == 1.0
    eps = store.episodes("r1", "final")
    assert len(eps) == 10 and eps[0]["note"] == "x" and eps[0]["success"] is True
    # An evaluation for a run the store has not seen yet creates the run.
    store.record_evaluation("unknown", {"name": "e", "metrics": {"success_rate": float("nan")}})
    assert store.get_run("unknown")["evaluations"][0]["success_rate"] is None
    store.close()


def test_leaderboard_ci_across_seeds(tmp_path: Path) -> None:
    store = Store(tmp_path / "s.sqlite")
    for seed, k in ((1, 8), (2, 6), (3, 7)):
        store.record_run(f"hover_s{seed}", task="hover", algo="ppo", reward="dense", guidance="none", seed=seed)
        store.record_evaluation(f"hover_s{seed}", evaluation("final", 10, k))
    store.record_run("lift", task="lift", algo="ppo", reward="kp", guidance="vlm", seed=1)
    store.record_evaluation("lift", evaluation("final", 10, 2, randomization="none"))
    store.record_run("pending", task="hover", algo="ppo", reward="dense", guidance="none", seed=9)
    board = store.leaderboard()
    hover = next(t for t in board["tasks"] if t["task"] == "hover")["groups"][0]
    mean, lo, hi = mean_ci95([0.8, 0.6, 0.7])
    assert hover["n_seeds"] == 3 and hover["success_mean"] == pytest.approx(mean)
    assert (hover["success_lo"], hover["success_hi"]) == (pytest.approx(lo), pytest.approx(hi))
    assert len(board["runs"]) == 5
    assert board["facets"]["task"] == ["hover", "lift"]
    assert [r["name"] for r in store.leaderboard(guidance="vlm")["runs"]] == ["lift"]
    assert [t["task"] for t in store.leaderboard(randomization="none")["tasks"]] == ["lift"]
    store.close()


def test_index_run_idempotent_and_tolerant(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    root.mkdir()
    write_run(root, "a", seed=1, success=0.6)
    write_run(root, "b", seed=2, evaluated=False)
    (root / "b" / "meta.json").write_text('{"run_name": "b", "status": "runn')  # half-written
    (root / "b" / "eval" / "partial.json").write_text('{"name": "partial", "metr')
    (root / "not_a_run").mkdir()
    store = open_store(runs_root=root)
    assert sorted(index_runs_root(store, root)) == ["a", "b"]
    first = store.counts()
    # The half-written evaluation is listed as invalid (with why), never ranked.
    assert first == {"runs": 2, "evaluations": 2, "episodes": 10, "artifacts": 2}
    assert sorted(index_runs_root(store, root)) == ["a", "b"]
    assert index_run(store, root / "a", force=True) == "a"
    assert store.counts() == first
    b = store.get_run("b")
    assert b["status"] == "running" and b["task"] == "crazyflie_hover"  # from config.yaml
    assert b["evaluations"][0]["invalid"].startswith("not valid JSON")
    # The writer finishes: the next pass picks the now-complete files up.
    (root / "b" / "eval" / "partial.json").write_text(json.dumps(evaluation("partial", 4, 4)))
    (root / "b" / "meta.json").write_text(json.dumps({"run_name": "b", "status": "finished", "seed": 2}))
    index_runs_root(store, root)
    b = store.get_run("b")
    assert b["status"] == "finished" and b["evaluations"][0]["success_rate"] == 1.0
    assert [e["invalid"] for e in b["evaluations"]] == [None]
    a = store.get_run("a")
    assert a["git_revision"] == "deadbeef" and a["train_wall_time_s"] == 12.5
    assert a["artifacts"][0]["relpath"] == "videos/a.mp4" and a["config_yaml"].startswith("task:")
    store.close()


def test_index_skips_symlinks_out_of_root(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    root.mkdir()
    outside = write_run(tmp_path, "outside")
    (root / "linked").symlink_to(outside, target_is_directory=True)
    run = write_run(root, "a")
    (run / "videos" / "evil.mp4").symlink_to(tmp_path / "outside" / "videos" / "a.mp4")
    store = open_store(runs_root=root)
    assert index_runs_root(store, root) == ["a"]
    assert [x["relpath"] for x in store.get_run("a")["artifacts"]] == ["videos/a.mp4"]
    store.close()


def test_index_reads_only_the_runs_own_files(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    root = tmp_path / "runs"
    root.mkdir()
    other = write_run(root, "other", success=0.9)
    run = write_run(root, "a", success=0.2)
    (root / "alias").symlink_to("other", target_is_directory=True)  # a second name for a run
    (run / "eval" / "stolen.json").symlink_to(other / "eval" / "final.json")
    (run / "videos" / "db.mp4").symlink_to(root / "eval_store.sqlite")
    os.mkfifo(run / "eval" / "fifo.json")  # would block a reader forever
    (run / "checkpoints").symlink_to("/", target_is_directory=True)
    (run / "videos" / "b.mp4").symlink_to("a.mp4")  # inside the run: fine
    store = open_store(runs_root=root)
    assert index_runs_root(store, root) == ["a", "other"]
    a = store.get_run("a")
    assert [e["name"] for e in a["evaluations"]] == ["final"] and a["evaluations"][0]["success_rate"] == 0.2
    assert [x["relpath"] for x in a["artifacts"]] == ["videos/a.mp4", "videos/b.mp4"]
    refused = sorted(r.getMessage() for r in caplog.records if r.getMessage().startswith("run a: refused"))
    assert refused == [
        "run a: refused checkpoints leads outside its run",
        "run a: refused eval/fifo.json is not a regular file",
        "run a: refused eval/stolen.json leads outside its run",
        "run a: refused videos/db.mp4 leads outside its run",
    ]
    caplog.clear()
    index_runs_root(store, root)  # unchanged: nothing logged again
    assert not [r for r in caplog.records if "refused" in r.getMessage()]
    store.close()


@pytest.mark.parametrize(
    ("ev", "reason"),
    [
        ([], "expected a JSON object, got a list"),
        ({"episodes": "10"}, "episodes: expected an integer in [0, 1000000000], got '10'"),
        ({"episodes": True}, "episodes: expected an integer in [0, 1000000000], got True"),
        ({"episodes": 10**30}, "episodes: expected an integer in [0, 1000000000], got an integer of 31 digits"),
        ({"seed": 2**70}, "seed: expected a 64-bit integer, got an integer of 22 digits"),
        ({"name": ["x"]}, "name: expected a string, got a list"),
        ({"metrics": [1, 2]}, "metrics: expected an object, got a list"),
        ({"metrics": {"success_rate": "0.5"}}, "metrics.success_rate: expected a number, got a string"),
        ({"metrics": {"success_rate": 1.5}}, "metrics.success_rate: 1.5 is not in [0, 1]"),
        ({"metrics": {"success_ci95": [0.1]}}, "metrics.success_ci95: expected [low, high]"),
        ({"metrics": {"other": 10**40}}, "evaluation.metrics.other: an integer of 41 digits (larger than 64 bits)"),
        ({"reward_terms": {"position": "big"}}, "reward_terms.position: expected a number, got a string"),
        ({"per_episode": {"0": {}}}, "per_episode: expected a list, got an object"),
        ({"per_episode": [{}, None]}, "per_episode[1]: expected an object, got null"),
        ({"per_episode": [{"episode": -1}]}, "per_episode[0].episode: expected an integer in [0, 1000000000], got -1"),
        ({"per_episode": [{"episode": 1}, {"episode": 1}]}, "per_episode[1].episode: episode 1 appears twice"),
        ({"per_episode": [{"success": "yes"}]}, "per_episode[0].success: expected true or false, got 'yes'"),
        ({"per_episode": [{"return": [1]}]}, "per_episode[0].return: expected a number, got a list"),
        ({"per_episode": [{"x": json.loads("[" * 34 + "]" * 34)}]}, "per_episode[0]: nested deeper than 32 levels"),
    ],
)
def test_malformed_evaluation_reasons(ev: object, reason: str, tmp_path: Path) -> None:
    assert evaluation_problem(ev) == reason
    store = Store(tmp_path / "s.sqlite")
    with pytest.raises(ValueError, match="evaluation for r: "):
        store.record_evaluation("r", ev)  # type: ignore[arg-type]
    assert store.counts()["evaluations"] == 0
    store.close()


def test_well_formed_evaluations_pass() -> None:
    assert evaluation_problem(evaluation("final", 10, 3)) is None
    # robot-rl eval writes NaN for the error when every episode crashed; sitl.json has no metrics
    assert evaluation_problem({"metrics": {"position_error_m": float("nan")}, "per_episode": []}) is None
    sitl = {"transport": "ros2", "final_position_error_m": 0.016, "crashed": False, "mode": "ACTIVE", "commands": 1094}
    assert evaluation_problem(sitl) is None
    assert evaluation_problem({"per_episode": [{"episode": 0, "success": 1, "crashed": 0}]}) is None


def test_hostile_meta_keeps_the_run(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    root.mkdir()
    run = write_run(root, "a")
    meta = json.loads((run / "meta.json").read_text())
    meta.update(seed=10**30, train_wall_time_s=10**400, status=["x"], versions="nope", task={"name": "hover"})
    (run / "meta.json").write_text(json.dumps(meta))
    (run / "config.yaml").write_text("a: " + "[" * 5000)  # not YAML (and deep)
    store = open_store(runs_root=root)
    assert index_runs_root(store, root) == ["a"]
    a = store.get_run("a")
    assert a["seed"] is None and a["train_wall_time_s"] is None and a["task"] == "hover"
    assert a["evaluations"][0]["success_rate"] == 0.5
    store.close()


def test_migration_from_v1_fills_the_board(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "v1.sqlite"
    with monkeypatch.context() as m:
        m.setattr(schema_mod, "MIGRATIONS", schema_mod.MIGRATIONS[:1])
        store = Store(path)
        with store.transaction() as tx:  # what a v1 robot_rl left behind
            tx.execute(
                "INSERT INTO runs (name, task, algo, seed) VALUES ('r1', 'hover', 'ppo', 1), ('r2', 'hover', 'ppo', 2)"
            )
            tx.execute(
                "INSERT INTO evaluations (run_id, name, randomization, episodes, success_rate, created_at)"
                " VALUES (1, 'old', 'none', 10, 0.2, 1.0), (1, 'new', 'train', 10, 0.6, 2.0)"
            )
        store.close()
    store = Store(path)
    assert store.schema_version() == SCHEMA_VERSION == 3
    board = store.leaderboard()
    assert board["total"] == 2 and [(r["name"], r["success_rate"]) for r in board["runs"]] == [
        ("r1", 0.6),
        ("r2", None),
    ]
    assert board["facets"]["randomization"] == ["none", "train"]
    only_none = store.leaderboard(randomization="none")
    assert only_none["total"] == 1 and only_none["runs"][0]["eval_name"] == "old"
    store.close()


def test_group_interval_from_sums() -> None:
    for rates in ([0.8], [0.8, 0.6, 0.7], [0.0, 1.0], [0.5] * 40):
        got = mean_ci95_from_sums(len(rates), sum(rates), sum(r * r for r in rates))
        assert got == pytest.approx(mean_ci95(rates))


_WRITER = textwrap.dedent(
    """
    import sys, time
    from robot_rl.store import Store
    path, tag, n, start = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
    store = Store(path)
    time.sleep(max(0.0, start - time.time()))  # both writers begin together
    for i in range(n):
        store.record_evaluation(f"run_{tag}_{i % 5}", {
            "name": f"eval_{i}", "episodes": 20, "metrics": {"success_rate": 0.5},
            "per_episode": [{"episode": j, "success": j % 2 == 0, "return": 1.0} for j in range(20)],
        })
        time.sleep(0.003)  # real writers pause between evaluations; lets the lock change hands
    store.close()
    """
)


def test_two_processes_writing_lose_nothing(tmp_path: Path) -> None:
    path = tmp_path / "shared.sqlite"
    Store(path).close()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    n = 200
    start = str(time.time() + 2.0)
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _WRITER, str(path), tag, str(n), start], env=env, stderr=subprocess.PIPE
        )
        for tag in ("a", "b")
    ]
    for p in procs:
        _, err = p.communicate(timeout=180)
        assert p.returncode == 0, err.decode()
    store = Store(path)
    assert store.counts() == {"runs": 10, "evaluations": 2 * n, "episodes": 2 * n * 20, "artifacts": 0}
    # The writes really interleaved (otherwise this test would prove nothing about locking).
    order = [
        r["name"][4]
        for r in store.query("SELECT r.name FROM evaluations e JOIN runs r ON r.id = e.run_id ORDER BY e.id")
    ]
    assert sum(a != b for a, b in zip(order, order[1:], strict=False)) >= 2, order
    store.close()


def test_sqlalchemy_url(tmp_path: Path) -> None:
    pytest.importorskip("sqlalchemy")
    store = open_store(f"sqlite:///{tmp_path / 'sa.sqlite'}")
    assert store.dialect == "sqlite" and store.schema_version() == SCHEMA_VERSION
    store.record_run("r", task="t", seed=1)
    store.record_evaluation("r", evaluation("e", 4, 2))
    assert store.leaderboard()["tasks"][0]["groups"][0]["success_mean"] == 0.5
    assert len(store.episodes("r", "e")) == 4
    store.close()


def test_the_headline_is_the_latest_standard_evaluation(tmp_path: Path) -> None:
    """Zero-policy, bundle, SITL and stress evaluations after the standard one never replace it; they fill their
    own columns, and the randomization filter sees the stress one."""
    store = Store(tmp_path / "s.sqlite")
    store.record_run("hover", task="hover", algo="ppo", reward="dense", guidance="none", seed=1)
    store.record_evaluation("hover", evaluation("checkpoint_train", 10, 8, policy="torch"))
    store.record_evaluation("hover", evaluation("zero_train", 10, 0, policy="zero"))
    store.record_evaluation("hover", evaluation("bundle_train", 10, 7, policy="onnx"))
    store.record_evaluation("hover", evaluation("checkpoint_max", 10, 3, policy="torch", randomization="max"))
    store.record_evaluation("hover", evaluation("pushed", 10, 5, policy="torch", conditions={"pushes": True}))
    store.record_evaluation("hover", {"name": "sitl", "transport": "in-process", "final_position_error_m": 0.036})
    (row,) = store.leaderboard()["runs"]
    assert (row["eval_name"], row["success_rate"]) == ("checkpoint_train", 0.8)
    assert (row["bundle_success_rate"], row["zero_success_rate"], row["sitl_error_m"]) == (0.7, 0.0, 0.036)
    (group,) = store.leaderboard()["tasks"][0]["groups"]
    assert group["success_mean"] == 0.8
    (stressed,) = store.leaderboard(randomization="max")["runs"]
    assert (stressed["eval_name"], stressed["success_rate"]) == ("checkpoint_max", 0.3)
    kinds = {e["name"]: e["kind"] for e in store.get_run("hover")["evaluations"]}
    assert kinds == {
        "checkpoint_train": "standard",
        "zero_train": "zero",
        "bundle_train": "bundle",
        "checkpoint_max": "stress",
        "pushed": "stress",
        "sitl": "sitl",
    }
    store.close()


def test_migration_to_v3_gives_old_evaluations_their_kind_by_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "v2.sqlite"
    with monkeypatch.context() as m:
        m.setattr(schema_mod, "MIGRATIONS", schema_mod.MIGRATIONS[:2])
        store = Store(path)
        with store.transaction() as tx:  # a v2 store whose latest evaluation is a zero-policy one
            tx.execute("INSERT INTO runs (name, task, algo, seed) VALUES ('r1', 'hover', 'ppo', 1)")
            tx.execute(
                "INSERT INTO evaluations (run_id, name, randomization, episodes, success_rate, created_at)"
                " VALUES (1, 'checkpoint_train', 'train', 10, 0.9, 1.0), (1, 'zero_train', 'train', 10, 0.0, 2.0),"
                " (1, 'sitl', NULL, NULL, NULL, 3.0)"
            )
        store.close()
    store = Store(path)
    (row,) = store.leaderboard()["runs"]
    assert (row["eval_name"], row["success_rate"], row["zero_success_rate"]) == ("checkpoint_train", 0.9, 0.0)
    store.close()
