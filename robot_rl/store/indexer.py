"""(Re)index run directories written by ``robot-rl train/eval/play/export`` into the store.

Indexing is an idempotent upsert keyed by the run directory's name. A run being written right
now is normal: a half-written ``meta.json`` or evaluation file is skipped this time and picked up
on the next pass, because the fingerprint (sizes and mtimes) will have changed by then.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

import yaml

from robot_rl.store.store import DEFAULT_FILENAME, Store

log = logging.getLogger(__name__)

MAX_TEXT_BYTES = 2 * 1024 * 1024  # a resolved config is a few KB; refuse to slurp a huge file
_RUN_MARKERS = ("meta.json", "config.yaml", "eval", "tb")
# Subdirectory -> (glob, artifact kind). Only these reach the dashboard's artifact list.
_ARTIFACT_GLOBS: list[tuple[str, str, str]] = [
    ("videos", "*.mp4", "video"),
    ("videos", "*.webm", "video"),
    ("guidance", "keypoints_prompt.png", "keypoints_prompt"),
    ("guidance", "plan.json", "plan"),
    ("guidance", "*.png", "image"),
    ("guidance", "*.jpg", "image"),
    ("bundle", "policy.onnx", "policy_onnx"),
    ("bundle", "policy.yaml", "policy_yaml"),
    ("checkpoints", "*.pt", "checkpoint"),
]


def is_run_dir(path: Path) -> bool:
    return path.is_dir() and any((path / m).exists() for m in _RUN_MARKERS)


def _read_text(path: Path) -> str | None:
    try:
        if path.stat().st_size > MAX_TEXT_BYTES:
            log.warning("skipping %s: larger than %d bytes", path, MAX_TEXT_BYTES)
            return None
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None


def _read_json(path: Path) -> dict[str, Any] | None:
    text = _read_text(path)
    if text is None:
        return None
    try:
        obj = json.loads(text)
    except json.JSONDecodeError:
        # Most likely still being written; the next pass will see the whole file.
        log.info("skipping half-written or invalid JSON %s", path)
        return None
    return obj if isinstance(obj, dict) else None


def _inside(path: Path, root: Path) -> bool:
    try:
        return Path(os.path.realpath(path)).is_relative_to(root)
    except OSError:
        return False


def _stat_key(path: Path, base: Path) -> list[Any] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return [path.relative_to(base).as_posix(), st.st_size, st.st_mtime_ns]


def _fingerprint(run_dir: Path) -> str:
    """Sizes and mtimes of everything the index reads: unchanged means nothing to do."""
    files: list[Path] = [run_dir / "meta.json", run_dir / "config.yaml"]
    files += sorted((run_dir / "eval").glob("*.json"))
    for sub, pattern, _ in _ARTIFACT_GLOBS:
        files += sorted((run_dir / sub).glob(pattern))
    keys = [k for f in files if (k := _stat_key(f, run_dir)) is not None]
    return json.dumps(keys, separators=(",", ":"))


def _from_config(config: Any, key: str) -> Any:
    if not isinstance(config, dict):
        return None
    value = config.get(key)
    if isinstance(value, dict):
        return value.get("name")
    return value


def index_run(store: Store, run_dir: str | os.PathLike[str], *, force: bool = False) -> str | None:
    """Upsert one run directory (run, evaluations, episodes, artifacts) into ``store``.

    Returns the run name, or None when ``run_dir`` does not look like a run. Re-running it on an
    unchanged directory writes nothing.
    """
    run_dir = Path(run_dir)
    if not is_run_dir(run_dir):
        return None
    # The directory name is the key the dashboard serves artifacts under, so it wins over
    # meta.json's run_name should the two ever differ (meta's copy is kept in meta_json).
    name = run_dir.name
    fingerprint = _fingerprint(run_dir)
    if not force and store.get_fingerprint(name) == fingerprint:
        return name

    meta = _read_json(run_dir / "meta.json") or {}
    config_text = _read_text(run_dir / "config.yaml")
    config: Any = None
    if config_text:
        try:
            config = yaml.safe_load(config_text)  # safe_load: never construct objects from a file
        except yaml.YAMLError:
            config = None
    status = meta.get("status") or ("running" if not meta.get("finished_at") else "finished")
    fields: dict[str, Any] = {
        "run_dir": str(run_dir.resolve()),
        "task": meta.get("task") or _from_config(config, "task"),
        "algo": meta.get("algo") or _from_config(config, "algo"),
        "reward": meta.get("reward") or _from_config(config, "reward"),
        "guidance": meta.get("guidance") or _from_config(config, "guidance"),
        "seed": meta.get("seed") if meta.get("seed") is not None else _from_config(config, "seed"),
        "git_revision": meta.get("git_revision"),
        "versions": meta.get("versions") if isinstance(meta.get("versions"), dict) else None,
        "config_yaml": config_text,
        "meta": meta or None,
        "status": status,
        "started_at": meta.get("started_at"),
        "finished_at": meta.get("finished_at"),
        "train_wall_time_s": meta.get("train_wall_time_s"),
        "fingerprint": fingerprint,
    }

    evaluations: list[tuple[dict[str, Any], float]] = []
    for path in sorted((run_dir / "eval").glob("*.json")):
        ev = _read_json(path)
        if ev is None:
            continue
        ev.setdefault("name", path.stem)
        evaluations.append((ev, path.stat().st_mtime))

    root = Path(os.path.realpath(run_dir))
    artifacts: list[dict[str, Any]] = []
    seen: set[str] = set()
    for sub, pattern, kind in _ARTIFACT_GLOBS:
        for path in sorted((run_dir / sub).glob(pattern)):
            rel = path.relative_to(run_dir).as_posix()
            # A symlink leading out of the run is not an artifact of it; the server refuses
            # such paths anyway, this keeps them out of the page too.
            if rel in seen or not path.is_file() or not _inside(path, root):
                continue
            seen.add(rel)
            st = path.stat()
            artifacts.append({"kind": kind, "relpath": rel, "size_bytes": st.st_size, "mtime": st.st_mtime})

    with store.transaction() as tx:
        run_id = store._upsert_run(tx, name, fields)
        for ev, mtime in evaluations:
            store._upsert_evaluation(tx, run_id, ev, created_at=mtime)
        store.replace_artifacts(tx, run_id, artifacts)
    return name


def index_runs_root(store: Store, runs_root: str | os.PathLike[str], *, force: bool = False) -> list[str]:
    """Index every run directory directly under ``runs_root``; one broken run never stops the rest."""
    root = Path(runs_root)
    if not root.is_dir():
        return []
    real_root = Path(os.path.realpath(root))
    names: list[str] = []
    for entry in sorted(root.iterdir()):
        if entry.name.startswith(".") or entry.name.startswith(DEFAULT_FILENAME):
            continue
        if not _inside(entry, real_root):
            log.warning("skipping %s: symlink out of the runs root", entry)
            continue
        try:
            name = index_run(store, entry, force=force)
        except Exception:  # noqa: BLE001 - a dashboard must survive one odd directory
            log.exception("failed to index %s", entry)
            continue
        if name is not None:
            names.append(name)
    return names
