"""Learning curves from TensorBoard event files, tolerant of files still being written."""

from __future__ import annotations

import logging
import math
import threading
from collections import OrderedDict
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

MAX_POINTS = 600  # per tag: more than a plot's width in pixels is wasted bandwidth
_CACHE_SIZE = 64


def _event_files(tb_dir: Path) -> list[Path]:
    return sorted(p for p in tb_dir.rglob("*tfevents*") if p.is_file())


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

    def read(self, tb_dir: Path) -> dict[str, Any]:
        files = _event_files(tb_dir) if tb_dir.is_dir() else []
        if not files:
            return {"status": "no-logs", "tags": {}}
        try:
            key = tuple((str(p), p.stat().st_size, p.stat().st_mtime_ns) for p in files)
        except OSError:
            key = None
        with self._lock:
            hit = self._cache.get(str(tb_dir))
            if hit is not None and key is not None and hit[0] == key:
                self._cache.move_to_end(str(tb_dir))
                return hit[1]
        result = self._load(tb_dir, files)
        with self._lock:
            self._cache[str(tb_dir)] = (key, result)
            while len(self._cache) > _CACHE_SIZE:
                self._cache.popitem(last=False)
        return result

    @staticmethod
    def _load(tb_dir: Path, files: list[Path]) -> dict[str, Any]:
        # Imported lazily: tensorboard takes a second to import and only run pages need it.
        from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

        tags: dict[str, list[list[float]]] = {}
        # One accumulator per directory holding event files: SummaryWriter.add_scalars writes
        # sub-directories, and an accumulator only reads one directory.
        for directory in sorted({p.parent for p in files}):
            prefix = directory.relative_to(tb_dir).as_posix()
            try:
                acc = EventAccumulator(str(directory), size_guidance={"scalars": 0})
                # A truncated last record (writer mid-flush) ends this read early; what was
                # complete is kept and the rest appears on a later request.
                acc.Reload()
                names = acc.Tags().get("scalars", [])
            except Exception as exc:  # noqa: BLE001 - corrupt files must not break the page
                log.warning("could not read %s: %s", directory, exc)
                continue
            for tag in names:
                events = acc.Scalars(tag)
                full = tag if prefix == "." else f"{prefix}/{tag}"
                tags[full] = _downsample([[e.step, e.value] for e in events if math.isfinite(e.value)])
        return {"status": "ok" if tags else "empty", "tags": dict(sorted(tags.items()))}
