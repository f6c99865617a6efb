"""logger=wandb: a Weights & Biases run in offline mode beside TensorBoard, read back with wandb's own record
schema (wandb.proto's Record) from its transaction log; nothing leaves the machine (WANDB_MODE=offline)."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest

pytest.importorskip("wandb")

BLOCK = 32 * 1024  # the transaction log is LevelDB's log format: 32 KiB blocks of framed chunks
FULL, FIRST, MIDDLE, LAST = 1, 2, 3, 4


def wandb_records(path: Path) -> list:
    """The protobuf Records of a .wandb file: a 7-byte file header (':W&B', magic 0xBEE1, version), then chunks
    of (crc32c u32, length u16, type u8, payload), a record split over blocks as FIRST, MIDDLE..., LAST."""
    from wandb.proto import wandb_internal_pb2 as pb

    data = path.read_bytes()
    ident, magic, version = struct.unpack_from("<4sHB", data)
    assert (ident, magic, version) == (b":W&B", 0xBEE1, 0)
    records, pending, pos = [], b"", 7
    while pos + 7 <= len(data):
        left = BLOCK - pos % BLOCK
        if left < 7:  # a block's tail too short for a header is padding
            pos += left
            continue
        _, length, kind = struct.unpack_from("<IHB", data, pos)
        if kind == 0 and length == 0:
            break
        payload = data[pos + 7 : pos + 7 + length]
        pos += 7 + length
        pending = payload if kind in (FULL, FIRST) else pending + payload
        if kind in (FULL, LAST):
            r = pb.Record()
            r.ParseFromString(pending)
            records.append(r)
    return records


def test_wandb_offline_run_holds_the_training_scalars(tmp_path, monkeypatch):
    from robot_rl import commands

    monkeypatch.delenv("WANDB_MODE", raising=False)
    monkeypatch.setenv("WANDB_API_KEY", "")  # no credentials: offline mode must not need any
    (run,) = commands.cmd_train(
        [
            "logger=wandb",
            f"runs_root={tmp_path}",
            "run_name=wb",
            "seed=3",
            "task.num_worlds=16",
            "train.iterations=3",
            "algo.num_steps_per_env=8",
            "train.progress=false",
        ]  # fmt: skip
    )
    assert list((run / "tb").glob("events.*"))  # TensorBoard as always
    (log,) = run.glob("wandb/offline-run-*/run-*.wandb")
    records = wandb_records(log)
    kinds = [r.WhichOneof("record_type") for r in records]
    assert "run" in kinds and "exit" in kinds
    history: dict[str, dict[int, float]] = {}
    for r in records:
        if r.WhichOneof("record_type") == "history":
            items = {i.key or "/".join(i.nested_key): json.loads(i.value_json) for i in r.history.item}
            for key, value in items.items():
                if not key.startswith("_"):
                    history.setdefault(key, {})[items["_step"]] = value
    meta = json.loads((run / "meta.json").read_text())
    assert history["Perf/total_env_steps"] == {0: 128, 1: 256, 2: 384} and meta["total_steps"] == 384
    assert set(history["Train/learning_rate"]) == {0, 1, 2} and "Loss/value" in history
    (config,) = [r.run.config for r in records if r.WhichOneof("record_type") == "run"]
    values = {u.key: json.loads(u.value_json) for u in config.update}
    assert values["seed"] == 3 and values["logger"] == "wandb" and values["task"]["num_worlds"] == 16
