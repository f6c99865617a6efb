"""Learning curves from TensorBoard event files, tolerant of files still being written.

Only a run's own files are read: ``tb/`` must resolve inside the run, the walk does not descend
symlinked subdirectories, and an event file that is a symlink counts only if it resolves inside
the run. TensorBoard's reader is handed those files one by one, never a directory it would list
(and follow links in) by itself.
"""

from __future__ import annotations

import logging
import math
import threading
from collections import OrderedDict
from pathlib import Path
from typing import Any

from robot_rl.store.paths import Refused, resolve_dir, walk_files

log = logging.getLogger(__name__)

MAX_POINTS = 600  # per tag: more than a plot's width in pixels is wasted bandwidth
MAX_EVENT_FILES = 256  # a run writes a handful (one per add_scalars group and resume)
_CACHE_SIZE = 64


def event_files(run_dir: Path) -> list[tuple[Path, Path]]:
    """(path under tb/, real path) of the run's event files; raises Refused if tb/ leads out."""
    try:
        tb = resolve_dir(run_dir, run_dir / "tb")
    except OSError:
        return []
    return list(walk_files(tb, run_dir, "tfevents", MAX_EVENT_FILES))


def _downsample(points: list[list[float]], limit: int = MAX_POINTS) -> list[list[float]]:
    if len(points) <= limit:
        return points
    stride = len(points) / limit
    out = [points[int(i * stride)] for i in range(limit)]
    out[-1] = points[-1]  # keep the latest value: that is what a live run's reader looks for
    return out


class ScalarReader:
    """Reads scalars per run, cached until any event file's size or mtime changes."""

    def __init__(self) -> None:
        self._cache: OrderedDict[str, tuple[Any, dict[str, Any]]] = OrderedDict()
        self._lock = threading.Lock()

    def read(self, run_dir: Path) -> dict[str, Any]:
        """Scalars of the run whose real directory is ``run_dir``, from its ``tb/`` only."""
        try:
            files = event_files(run_dir)
        except Refused as exc:
            log.warning("run %s: refused to read TensorBoard logs: %s", run_dir.name, exc)
            return {"status": "refused", "reason": str(exc), "tags": {}}
        if not files:
            return {"status": "no-logs", "tags": {}}
        try:
            key = tuple((str(real), real.stat().st_size, real.stat().st_mtime_ns) for _, real in files)
        except OSError:
            key = None
        with self._lock:
            hit = self._cache.get(str(run_dir))
            if hit is not None and key is not None and hit[0] == key:
                self._cache.move_to_end(str(run_dir))
                return hit[1]
        result = self._load(run_dir / "tb", files)
        with self._lock:
            self._cache[str(run_dir)] = (key, result)
            while len(self._cache) > _CACHE_SIZE:
                self._cache.popitem(last=False)
        return result

    @staticmethod
    def _load(tb_dir: Path, files: list[tuple[Path, Path]]) -> dict[str, Any]:
        # Imported lazily: tensorboard takes a second to import and only run pages need it.
        from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

        merged: dict[str, dict[float, float]] = {}
        # One accumulator per file; the tag prefix is the file's directory under tb/, since
        # SummaryWriter.add_scalars writes sub-directories. Files of one directory are read in
        # name (= creation time) order and a later file's value wins at a step both logged: a
        # resumed run re-logs from its checkpoint.
        for path, real in sorted(files, key=lambda f: f[0]):
            prefix = path.parent.relative_to(tb_dir).as_posix()
            if "tfevents" not in real.name:
                continue  # the reader picks file or directory mode by this name
            try:
                acc = EventAccumulator(str(real), size_guidance={"scalars": 0})
                # A truncated last record (writer mid-flush) ends this read early; what was
                # complete is kept and the rest appears on a later request.
                acc.Reload()
                names = acc.Tags().get("scalars", [])
            except Exception as exc:  # noqa: BLE001 - corrupt files must not break the page
                log.warning("could not read %s: %s", path, exc)
                continue
            for tag in names:
                full = tag if prefix == "." else f"{prefix}/{tag}"
                series = merged.setdefault(full, {})
                for e in acc.Scalars(tag):
                    if math.isfinite(e.value):
                        series[e.step] = e.value
        tags = {t: _downsample([[s, v] for s, v in sorted(series.items())]) for t, series in merged.items()}
        return {"status": "ok" if tags else "empty", "tags": dict(sorted(tags.items()))}
