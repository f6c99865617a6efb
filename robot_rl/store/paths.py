"""Files stay inside their run: what the indexer reads and the dashboard serves.

A run is a real directory (not a symlink) directly under the runs root. Every file read on a
run's behalf is resolved (symlinks followed) and must be a regular file inside that run's real
directory: a symlink to the store database, to another run or to ``/`` is refused, and so is a
FIFO or a device that would block or never end a read. Directories are listed without following
symlinked subdirectories out of the run.
"""

from __future__ import annotations

import fnmatch
import os
import stat
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

_BAD_NAME_CHARS = ("/", "\\", "\x00")
# Run subdirectories whose files the dashboard may serve; tb/, meta.json, config.yaml and
# anything else in a run stay private, also when an artifact is a symlink to them.
ARTIFACT_DIRS = frozenset({"videos", "guidance", "bundle", "eval", "checkpoints"})


class Refused(Exception):
    """A path that leads outside its run, or is not a regular file; the message is the short reason."""


@dataclass(frozen=True)
class Entry:
    """One file of a run: its path relative to the run, its real location and its stat."""

    relpath: str
    real: str  # a str: pathlib objects cost more than the listing in a 10,000-run pass
    size: int
    mtime: float
    mtime_ns: int


def real_root(runs_root: str | os.PathLike[str]) -> Path:
    return Path(os.path.realpath(runs_root))


def run_dir_in(runs_root: str | os.PathLike[str], name: str) -> Path | None:
    """The run ``name``'s real directory under the runs root, or None.

    A run directory that is itself a symlink (even to another run) is not a run: its files would
    be another directory's files under a second name.
    """
    if not name or name in (".", "..") or any(c in name for c in _BAD_NAME_CHARS):
        return None
    path = real_root(runs_root) / name
    try:
        st = os.lstat(path)
    except OSError:
        return None
    return path if stat.S_ISDIR(st.st_mode) else None


def _rel(run_dir: Path, path: Path) -> str:
    try:
        return path.relative_to(run_dir).as_posix()
    except ValueError:
        return path.name


def in_artifact_dir(run_dir: Path, real: str | Path) -> bool:
    """Whether ``real`` (a real path inside ``run_dir``) lies in one of its ARTIFACT_DIRS."""
    rel = os.path.relpath(real, run_dir)
    return rel.split(os.sep, 1)[0] in ARTIFACT_DIRS and os.sep in rel


def resolve_dir(run_dir: Path, path: Path) -> Path:
    """Real location of a directory inside ``run_dir`` (real itself); raises Refused or OSError."""
    real = Path(os.path.realpath(path))
    if not real.is_relative_to(run_dir):
        raise Refused(f"{_rel(run_dir, path)} leads outside its run")
    if not stat.S_ISDIR(os.stat(real).st_mode):
        raise NotADirectoryError(str(path))
    return real


def resolve_file(run_dir: Path, path: Path) -> tuple[Path, os.stat_result]:
    """Real location and stat of a file inside ``run_dir`` (real itself).

    Raises Refused when the real location is outside the run or not a regular file, and
    FileNotFoundError (an OSError) when there is nothing there.
    """
    real = Path(os.path.realpath(path))
    if not real.is_relative_to(run_dir):
        raise Refused(f"{_rel(run_dir, path)} leads outside its run")
    st = os.stat(real)
    if not stat.S_ISREG(st.st_mode):
        raise Refused(f"{_rel(run_dir, path)} is not a regular file")
    return real, st


@dataclass
class RunScan:
    """One listing of a run directory: its top-level files, the matching files of its
    subdirectories, and what was refused ("<relpath> <reason>" lines for the caller to log)."""

    marked: bool  # holds at least one of the markers asked for (it looks like a run)
    files: dict[str, Entry]
    listing: dict[str, list[Entry]]
    refused: list[str]


def _entry(run_dir: Path, e: os.DirEntry[str], rel: str) -> Entry:
    """Raises Refused or OSError."""
    if e.is_symlink():
        real_path, st = resolve_file(run_dir, Path(e.path))
        real = str(real_path)
    else:
        st = e.stat(follow_symlinks=False)
        if not stat.S_ISREG(st.st_mode):
            raise Refused(f"{rel} is not a regular file")
        real = e.path
    return Entry(rel, real, st.st_size, st.st_mtime, st.st_mtime_ns)


def _scandir(path: str | Path) -> list[os.DirEntry[str]]:
    try:
        with os.scandir(path) as it:
            return list(it)
    except OSError:
        return []


def scan_run(run_dir: Path, files: Sequence[str], subdirs: dict[str, Sequence[str]], markers: Sequence[str]) -> RunScan:
    """List a run (``run_dir`` real, inside the runs root): the top-level ``files`` and, per
    subdirectory, the regular files matching its patterns, all checked to lie inside the run.

    Cheap enough for a re-index pass over 10,000 runs: one listing per directory, a stat per
    matching file; symlinks cost a realpath and are followed only where they stay in the run.
    """
    names = {e.name: e for e in _scandir(run_dir)}
    refused: list[str] = []
    found: dict[str, Entry] = {}
    for name in files:
        e = names.get(name)
        if e is None:
            continue
        try:
            found[name] = _entry(run_dir, e, name)
        except Refused as exc:
            refused.append(str(exc))
        except OSError:
            pass
    listing: dict[str, list[Entry]] = {}
    for sub, patterns in subdirs.items():
        listing[sub] = []
        e = names.get(sub)
        if e is None:
            continue
        d: str | Path = e.path
        try:
            if e.is_symlink():
                d = resolve_dir(run_dir, Path(e.path))
            elif not e.is_dir(follow_symlinks=False):
                continue
        except Refused as exc:
            refused.append(str(exc))
            continue
        except OSError:
            continue
        matched = [f for f in _scandir(d) if any(fnmatch.fnmatchcase(f.name, p) for p in patterns)]
        for f in sorted(matched, key=lambda f: f.name):
            rel = f"{sub}/{f.name}"
            try:
                listing[sub].append(_entry(run_dir, f, rel))
            except Refused as exc:
                refused.append(str(exc))
            except OSError:
                continue  # gone since the listing (a writer renamed it): the next pass sees it
    marked = any(m in names for m in markers)
    return RunScan(marked, found, listing, refused)


def walk_files(top: Path, run_dir: Path, match: str, limit: int) -> Iterator[tuple[Path, Path]]:
    """(path, real path) of regular files under ``top`` whose name contains ``match``.

    ``top`` must already be a real directory inside ``run_dir``. Symlinked subdirectories are
    not descended (os.walk's followlinks=False); symlinked files count only if they resolve
    inside the run. Stops after ``limit`` files so a huge tree cannot stall a request.
    """
    n = 0
    for dirpath, dirnames, filenames in os.walk(top, followlinks=False):
        dirnames.sort()
        for name in sorted(filenames):
            if match not in name:
                continue
            path = Path(dirpath) / name
            try:
                real, _ = resolve_file(run_dir, path)
            except (Refused, OSError):
                continue
            yield path, real
            n += 1
            if n >= limit:
                return
