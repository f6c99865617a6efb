"""Run artifacts as the dashboard serves them: ``/artifacts/<run>/<path>`` URLs, files and types."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import quote, unquote

from robot_rl.store.paths import ARTIFACT_DIRS, Refused, in_artifact_dir, resolve_file, run_dir_in

PREFIX = "/artifacts/"
# Known types only; anything else is served as an inert download. HTML/SVG are deliberately
# not mapped to their types, so a file dropped into a run directory cannot run script here.
ARTIFACT_TYPES = {
    ".mp4": "video/mp4",
    ".webm": "video/webm",
    ".png": "image/png",
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".json": "application/json",
    ".yaml": "text/plain; charset=utf-8",
    ".onnx": "application/octet-stream",
    ".pt": "application/octet-stream",
}
INLINE_TYPES = {
    "video/mp4",
    "video/webm",
    "image/png",
    "image/jpeg",
    "application/json",
    "text/plain; charset=utf-8",
}
ARTIFACT_CSP = "default-src 'none'; sandbox"
_RANGE_RE = re.compile(r"^bytes=(\d*)-(\d*)$")


class Unsatisfiable(Exception):
    """A byte range that starts past the end of the file (416)."""


def artifact_url(run_name: str, relpath: str) -> str:
    return PREFIX + quote(run_name, safe="") + "/" + "/".join(quote(s, safe="") for s in relpath.split("/"))


def _fully_decoded(segment: str) -> str:
    for _ in range(4):
        nxt = unquote(segment)
        if nxt == segment:
            break
        segment = nxt
    return segment


def artifact_path(runs_root: Path, raw_path: str) -> Path:
    """Map the still-encoded part of ``/artifacts/<run>/<rel>`` to the file to serve.

    Raises FileNotFoundError (404) for: empty, ``.`` or ``..`` segments (also when
    percent-encoded once or several times), separators or NUL hidden in a segment, directories
    outside ``ARTIFACT_DIRS``, a run that is not a real directory under the runs root, and
    missing files. Raises Refused (403, with the reason) when the file's real location (every
    symlink followed) is outside its own run or outside the run's artifact directories (a link to
    the store database, to another run, to ``/``, or to the run's private ``tb/``), or is not a
    regular file.
    """
    segments = raw_path.split("/")
    if len(segments) < 3:
        raise FileNotFoundError(raw_path)
    decoded = []
    for raw in segments:
        once = unquote(raw)
        deep = _fully_decoded(raw)
        for s in (once, deep):
            if s in ("", ".", "..") or "/" in s or "\\" in s or "\x00" in s:
                raise FileNotFoundError(raw_path)
        decoded.append(once)
    if decoded[1] not in ARTIFACT_DIRS:
        raise FileNotFoundError(raw_path)
    run_dir = run_dir_in(runs_root, decoded[0])
    if run_dir is None:
        raise FileNotFoundError(raw_path)
    real, _ = resolve_file(run_dir, run_dir.joinpath(*decoded[1:]))
    if not in_artifact_dir(run_dir, real):
        raise Refused(f"{'/'.join(decoded[1:])} leads out of the run's artifact directories")
    return real


def resolve_artifact(runs_root: Path, raw_path: str) -> Path | None:
    """``artifact_path``, or None for anything it refuses."""
    try:
        return artifact_path(runs_root, raw_path)
    except (Refused, OSError):
        return None


def content_type(path: Path) -> tuple[str, str]:
    """(Content-Type, Content-Disposition) for an artifact: only known media types show inline."""
    ctype = ARTIFACT_TYPES.get(path.suffix.lower(), "application/octet-stream")
    return ctype, "inline" if ctype in INLINE_TYPES else "attachment"


def byte_range(header: str | None, size: int) -> tuple[int, int] | None:
    """The inclusive (start, end) a ``Range`` header asks of a ``size``-byte file, or None for all of it.

    Multi-range and malformed headers get the whole file, which RFC 9110 allows. Raises
    Unsatisfiable when the range starts at or past the end.
    """
    if not header:
        return None
    m = _RANGE_RE.match(header.strip())
    if not m or not (m.group(1) or m.group(2)):
        return None
    end = size - 1
    if m.group(1):
        start = int(m.group(1))
        if m.group(2):
            end = min(int(m.group(2)), size - 1)
    else:  # suffix range: the last N bytes
        start = max(0, size - int(m.group(2)))
    if start >= size or start > end:
        raise Unsatisfiable(f"bytes */{size}")
    return start, end
