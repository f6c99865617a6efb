"""(Re)index run directories written by ``robot-rl train/eval/play/export`` into the store.

Indexing is an idempotent upsert keyed by the run directory's name. A run being written right
now is normal: a half-written ``meta.json`` or evaluation file is skipped this time and picked up
on the next pass, because the fingerprint (sizes and mtimes) will have changed by then.
"""

from __future__ import annotations

import fnmatch
import json
import logging
import os
from pathlib import Path
from typing import Any

import yaml

from robot_rl.store import writes
from robot_rl.store.paths import Entry, RunScan, in_artifact_dir, scan_run
from robot_rl.store.run_status import true_status
from robot_rl.store.store import DEFAULT_FILENAME, Store
from robot_rl.store.validate import evaluation_problem

log = logging.getLogger(__name__)

MAX_TEXT_BYTES = 2 * 1024 * 1024  # a resolved config is a few KB; refuse to slurp a huge file
MAX_EVAL_BYTES = 16 * 1024 * 1024  # about 150,000 per-episode rows
_RUN_MARKERS = ("meta.json", "config.yaml", "eval", "tb")
# (subdirectory, file pattern, artifact kind). Only these reach the dashboard's artifact list.
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
_SUBDIRS: dict[str, list[str]] = {"eval": ["*.json"]}
for _sub, _pattern, _ in _ARTIFACT_GLOBS:
    _SUBDIRS.setdefault(_sub, []).append(_pattern)
_TOP_FILES = ("meta.json", "config.yaml")
# libyaml's loader where PyYAML has it: the pure-Python one spends ~30 ms on a 1 KB config,
# which is most of indexing 10,000 runs. Both are safe loaders (plain data, no objects).
_YAMLLoader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
# Warned-about symlinked run directories: the re-indexer passes every few seconds.
_warned: set[str] = set()


def _read_bytes(path: str | Path, limit: int) -> bytes:
    """At most ``limit`` bytes of a regular file; raises ValueError beyond that."""
    with open(path, "rb") as f:
        data = f.read(limit + 1)
    if len(data) > limit:
        raise ValueError(f"larger than {limit // (1024 * 1024)} MiB")
    return data


def _read_text(path: str | Path, limit: int = MAX_TEXT_BYTES) -> str | None:
    try:
        return _read_bytes(path, limit).decode("utf-8", errors="replace")
    except ValueError as exc:
        log.warning("skipping %s: %s", path, exc)
    except OSError:
        pass
    return None


def _parse_json(text: str) -> Any:
    """json.loads, with every way hostile text fails it turned into ValueError (one message)."""
    try:
        return json.loads(text)
    except RecursionError:
        raise ValueError("not valid JSON: nested too deeply") from None
    except ValueError as exc:  # JSONDecodeError, and ints past Python's digit limit
        raise ValueError(f"not valid JSON ({str(exc).splitlines()[0][:120]})") from None


def _read_meta(path: str | Path) -> dict[str, Any]:
    text = _read_text(path)
    if text is None:
        return {}
    try:
        obj = _parse_json(text)
    except ValueError:
        # Most likely still being written; the next pass will see the whole file.
        log.info("skipping half-written or invalid JSON %s", path)
        return {}
    return obj if isinstance(obj, dict) else {}


def _read_evaluation(entry: Entry) -> tuple[dict[str, Any] | None, str | None]:
    """(evaluation, None) or (None, why it is invalid)."""
    try:
        ev = _parse_json(_read_bytes(entry.real, MAX_EVAL_BYTES).decode("utf-8", errors="replace"))
    except ValueError as exc:
        return None, str(exc)
    except OSError as exc:
        return None, f"unreadable ({exc.strerror or exc})"
    problem = evaluation_problem(ev)
    return (None, problem) if problem else (ev, None)


def _from_config(config: Any, key: str) -> Any:
    if not isinstance(config, dict):
        return None
    value = config.get(key)
    if isinstance(value, dict):
        return value.get("name")
    return value


_LIVE = "|live:"


def _owner_alive(owner: str) -> bool:
    host, _, rest = owner.partition(":")
    pid, _, started = rest.partition(":")
    meta = {"status": "running", "host": host, "pid": int(pid) if pid.isdigit() else None}
    meta["pid_started"] = int(started) if started.isdigit() else None
    return true_status(meta) == "running"


def _fingerprint(scan: RunScan) -> str:
    """Sizes and mtimes of everything the index reads (and what it refused): unchanged means
    nothing to do."""
    keys: list[Any] = [[e.relpath, e.size, e.mtime_ns] for e in scan.files.values()]
    keys += [[e.relpath, e.size, e.mtime_ns] for entries in scan.listing.values() for e in entries]
    keys += sorted(scan.refused)
    return json.dumps(keys, separators=(",", ":"))


def index_run(store: Store, run_dir: str | os.PathLike[str], *, force: bool = False) -> str | None:
    """Upsert one run directory (run, evaluations, episodes, artifacts) into ``store``.

    Returns the run name, or None when ``run_dir`` does not look like a run. Re-running it on an
    unchanged directory writes nothing. Files whose real location is outside the run are not
    read; a malformed evaluation file is recorded as an invalid evaluation (one log line).
    """
    return _index_run(store, Path(os.path.realpath(run_dir)), force=force, known=None, use_known=False)


def _index_run(store: Store, run_dir: Path, *, force: bool, known: str | None, use_known: bool) -> str | None:
    """``run_dir`` is the real directory (no symlinks left in it)."""
    scan = scan_run(run_dir, _TOP_FILES, _SUBDIRS, _RUN_MARKERS)
    if not scan.marked:
        return None
    # The directory name is the key the dashboard serves artifacts under, so it wins over
    # meta.json's run_name should the two ever differ (meta's copy is kept in meta_json).
    name = run_dir.name
    fingerprint = _fingerprint(scan)
    stored = known if use_known else store.get_fingerprint(name)
    # A running run's fingerprint also names its process: once that is gone (kill -9) the run is re-indexed
    # as interrupted although none of its files changed.
    files, _, owner = (stored or "").partition(_LIVE)
    if not force and files == fingerprint and (not owner or _owner_alive(owner)):
        return name
    for reason in scan.refused:
        log.warning("run %s: refused %s", name, reason)

    meta = _read_meta(scan.files["meta.json"].real) if "meta.json" in scan.files else {}
    config_text = _read_text(scan.files["config.yaml"].real) if "config.yaml" in scan.files else None
    config: Any = None
    if config_text:
        try:
            config = yaml.load(config_text, Loader=_YAMLLoader)  # a safe loader: never constructs objects
        except (yaml.YAMLError, RecursionError, ValueError):
            config = None
    status = true_status(meta) or ("running" if not meta.get("finished_at") else "finished")
    if status == "running" and isinstance(meta.get("pid"), int):
        fingerprint += f"{_LIVE}{meta.get('host')}:{meta['pid']}:{meta.get('pid_started')}"
    fields: dict[str, Any] = {
        "run_dir": str(run_dir),
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
    invalid: list[tuple[str, str, float]] = []
    for entry in scan.listing["eval"]:
        stem = Path(entry.relpath).stem
        ev, problem = _read_evaluation(entry)
        if ev is None:
            log.warning("run %s: evaluation %s is invalid: %s", name, entry.relpath, problem)
            invalid.append((stem, problem or "invalid", entry.mtime))
            continue
        if not ev.get("name"):
            ev["name"] = stem
        evaluations.append((ev, entry.mtime))

    artifacts: list[dict[str, Any]] = []
    seen: set[str] = set()
    for sub, pattern, kind in _ARTIFACT_GLOBS:
        for e in scan.listing[sub]:
            if e.relpath in seen or not fnmatch.fnmatchcase(e.relpath.rsplit("/", 1)[-1], pattern):
                continue
            seen.add(e.relpath)
            if not in_artifact_dir(run_dir, e.real):  # e.g. a link to the run's own tb/ or meta.json
                log.warning("run %s: refused %s: leads out of the run's artifact directories", name, e.relpath)
                continue
            artifacts.append({"kind": kind, "relpath": e.relpath, "size_bytes": e.size, "mtime": e.mtime})

    with store.transaction() as tx:
        run_id = writes.upsert_run(tx, name, fields)
        writes.drop_invalid_evaluations(tx, run_id)
        for ev, mtime in evaluations:
            writes.upsert_evaluation(tx, run_id, ev, created_at=mtime)
        for ev_name, reason, mtime in invalid:
            writes.record_invalid_evaluation(tx, run_id, ev_name, reason, mtime)
        writes.replace_artifacts(tx, run_id, artifacts)
        writes.refresh_board(tx, run_id)
    return name


def _warn_once(key: str, message: str, *args: Any) -> None:
    if key in _warned:
        return
    if len(_warned) < 10_000:
        _warned.add(key)
    log.warning(message, *args)


def index_runs_root(store: Store, runs_root: str | os.PathLike[str], *, force: bool = False) -> list[str]:
    """Index every run directory directly under ``runs_root``; one broken run never stops the rest.

    A run directory that is a symlink (out of the runs root, or to another run) is skipped.
    """
    root = Path(runs_root)
    if not root.is_dir():
        return []
    known = store.fingerprints()  # one query, not one per run
    real_root = Path(os.path.realpath(root))
    names: list[str] = []
    try:
        with os.scandir(root) as it:
            entries = sorted(it, key=lambda e: e.name)
    except OSError as exc:
        log.warning("cannot list %s: %s", root, exc.strerror or exc)
        return []
    for entry in entries:
        if entry.name.startswith(".") or entry.name.startswith(DEFAULT_FILENAME):
            continue
        if entry.is_symlink():
            _warn_once(entry.path, "skipping %s: a run directory must not be a symlink", entry.path)
            continue
        if not entry.is_dir(follow_symlinks=False):
            continue
        try:
            run_dir = real_root / entry.name
            name = _index_run(store, run_dir, force=force, known=known.get(entry.name), use_known=True)
        except Exception:  # noqa: BLE001 - a dashboard must survive one odd directory
            log.exception("failed to index %s", entry.path)
            continue
        if name is not None:
            names.append(name)
    return names
