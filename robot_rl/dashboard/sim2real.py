"""The "sim vs real" page's data: ``<runs_root>/sim2real/<name>/`` folders written by ``robot-rl replay``
(``replay.json``, ``replay.svg``) and ``robot-rl sysid`` (``sysid.yaml``, ``report.html``).

A folder is an entry when it is a real directory (not a symlink) directly under a real ``sim2real/``
directory of the runs root; a file is served or read only when its real location (symlinks followed) is a
regular file inside its own folder, and only the four names above are ever served. A replay.json that is
missing, too big, not JSON or not shaped as replay writes it becomes that entry's ``invalid`` reason (and one
log line), never an error of the page or the server; a bad log inside a good file is that log's ``invalid``.
What reaches the page is bounded: the logged trajectory decimated to ``MAX_POINTS`` samples, at most
``MAX_WINDOWS`` open-loop windows per model (evenly chosen; the error statistics are replay's, over all).
"""

from __future__ import annotations

import json
import logging
import os
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote

import yaml

from robot_rl.store.paths import Refused, real_root

log = logging.getLogger(__name__)

FOLDER = "sim2real"
PREFIX = "/sim2real/"
# The files an entry may serve, with their types. report.html is mujoco.sysid's page: served as HTML under a
# sandbox CSP (no script runs, nothing loads from elsewhere; its tables and text read as they are).
FILES = {
    "replay.json": "application/json",
    "replay.svg": "image/svg+xml",
    "report.html": "text/html; charset=utf-8",
    "sysid.yaml": "text/plain; charset=utf-8",
}
FILE_CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; sandbox"
MAX_ENTRIES = 500
MAX_REPLAY_BYTES = 64 * 1024 * 1024
MAX_SYSID_BYTES = 1024 * 1024
MAX_POINTS = 2000
MAX_WINDOWS = 60
MAX_REPORT_LINES = 200
AXES = ("x", "y", "z")
_BAD_NAME_CHARS = ("/", "\\", "\x00")


class Invalid(ValueError):
    """A replay.json (or one log in it) that is not what replay writes; the message is the reason."""


def _good_name(name: str) -> bool:
    return bool(name) and name not in (".", "..") and not any(c in name for c in _BAD_NAME_CHARS)


def folder_in(runs_root: str | os.PathLike[str]) -> Path | None:
    """The runs root's real ``sim2real/`` directory, or None (absent, a file, or a symlink)."""
    path = real_root(runs_root) / FOLDER
    try:
        return path if stat.S_ISDIR(os.lstat(path).st_mode) else None
    except OSError:
        return None


def entry_dir_in(runs_root: str | os.PathLike[str], name: str) -> Path | None:
    """Entry ``name``'s real directory, or None; an entry that is a symlink (even to another entry) is none."""
    top = folder_in(runs_root)
    if top is None or not _good_name(name):
        return None
    path = top / name
    try:
        return path if stat.S_ISDIR(os.lstat(path).st_mode) else None
    except OSError:
        return None


def file_url(name: str, filename: str) -> str:
    return PREFIX + quote(name, safe="") + "/" + quote(filename, safe="")


def _entry_file(entry: Path, filename: str) -> Path | None:
    """The real path of ``filename`` in ``entry`` when it is a regular file inside it; None when absent.
    Raises Refused when it leads out of the entry or is not a regular file."""
    real = Path(os.path.realpath(entry / filename))
    if not real.is_relative_to(entry):
        raise Refused(f"{filename} leads outside its sim2real folder")
    try:
        st = os.stat(real)
    except OSError:
        return None
    if not stat.S_ISREG(st.st_mode):
        raise Refused(f"{filename} is not a regular file")
    return real


def file_path(runs_root: Path, raw_path: str) -> tuple[Path, str]:
    """Map the still-encoded ``<name>/<file>`` of ``/sim2real/<name>/<file>`` to the file to serve (its real
    path) and its content type.

    FileNotFoundError (404): not two segments, ``.``/``..``/separators/NUL in a segment (also when
    percent-encoded, once or more), a file name other than FILES, an entry that is not a real directory under
    the runs root's real sim2real/, a missing file. Refused (403, with the reason): the file's real location is
    outside its entry folder (a link to the store, a run, another entry, ``/``) or is not a regular file.
    """
    segments = raw_path.split("/")
    if len(segments) != 2:
        raise FileNotFoundError(raw_path)
    decoded = []
    for raw in segments:
        once, deep = unquote(raw), raw
        for _ in range(4):
            nxt = unquote(deep)
            if nxt == deep:
                break
            deep = nxt
        if not (_good_name(once) and _good_name(deep)):
            raise FileNotFoundError(raw_path)
        decoded.append(once)
    name, filename = decoded
    if filename not in FILES:
        raise FileNotFoundError(raw_path)
    entry = entry_dir_in(runs_root, name)
    if entry is None:
        raise FileNotFoundError(raw_path)
    real = _entry_file(entry, filename)
    if real is None:
        raise FileNotFoundError(raw_path)
    return real, FILES[filename]


def _files(name: str, entry: Path) -> tuple[dict[str, str], list[str]]:
    """URLs of the entry's servable files, and the refusals ("<file> <reason>") of those that lead out."""
    urls, refused = {}, []
    for filename in FILES:
        try:
            if _entry_file(entry, filename) is not None:
                urls[filename] = file_url(name, filename)
        except Refused as exc:
            refused.append(str(exc))
    return urls, refused


def list_entries(runs_root: Path) -> dict[str, Any]:
    """``/api/sim2real``: the entries (newest first), each with its servable files; no replay.json is parsed."""
    top = folder_in(runs_root)
    if top is None:
        return {"entries": [], "folder": FOLDER, "truncated": False}
    found = []
    try:
        with os.scandir(top) as it:
            for e in it:
                if e.is_dir(follow_symlinks=False) and _good_name(e.name):
                    found.append((e.stat(follow_symlinks=False).st_mtime, e.name))
    except OSError:
        pass
    found.sort(key=lambda p: (-p[0], p[1]))
    entries = []
    for mtime, name in found[:MAX_ENTRIES]:
        urls, refused = _files(name, top / name)
        entries.append({"name": name, "mtime": mtime, "files": urls, "refused": refused})
    return {"entries": entries, "folder": FOLDER, "truncated": len(found) > MAX_ENTRIES}


# -- reading replay.json --------------------------------------------------------------------------------------


def _number(x: Any, what: str) -> float:
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        raise Invalid(f"{what} is not a number")
    return float(x)


def _numbers(x: Any, what: str) -> list[float]:
    if not isinstance(x, list):
        raise Invalid(f"{what} is not a list")
    return [_number(v, what) for v in x]


def _vectors(x: Any, what: str, n: int | None = None) -> list[list[float]]:
    """A list of [x, y, z]."""
    if not isinstance(x, list) or (n is not None and len(x) != n):
        raise Invalid(f"{what} is not a list of {n if n is not None else 'any number of'} [x, y, z]")
    out = []
    for v in x:
        if not isinstance(v, list) or len(v) != 3:
            raise Invalid(f"{what} holds an entry that is not [x, y, z]")
        out.append([_number(c, what) for c in v])
    return out


def _mapping(x: Any, what: str) -> Mapping[str, Any]:
    if not isinstance(x, Mapping):
        raise Invalid(f"{what} is not an object")
    return x


def _evenly(n: int, k: int) -> list[int]:
    """``k`` indices spread evenly over ``range(n)`` (all of them when n <= k), first and last included."""
    if n <= k:
        return list(range(n))
    return sorted({round(i * (n - 1) / (k - 1)) for i in range(k)}) if k > 1 else [0]


def _window_times(t: list[float], start: float, steps: int) -> list[float]:
    """The clock of a window's predicted samples: replay predicts step j at the log's sample start + j + 1."""
    lo, hi = 0, len(t)
    while lo < hi:  # the first sample at or after start
        mid = (lo + hi) // 2
        if t[mid] < start - 1e-6:
            lo = mid + 1
        else:
            hi = mid
    dt = (t[-1] - t[0]) / (len(t) - 1) if len(t) > 1 else 0.01
    return [t[lo + j + 1] if lo + j + 1 < len(t) else start + dt * (j + 1) for j in range(steps)]


def _open_loop(r: Any, i: int, t: list[float]) -> dict[str, Any]:
    what = f"open_loop[{i}]"
    r = _mapping(r, what)
    label = r.get("label")
    if not isinstance(label, str) or not label:
        raise Invalid(f"{what}.label is not a name")
    horizons = _numbers(r.get("horizons_s"), f"{what}.horizons_s")
    median = _vectors(r.get("median_m"), f"{what}.median_m", len(horizons))
    p90 = _vectors(r.get("p90_m"), f"{what}.p90_m", len(horizons))
    starts = _numbers(r.get("starts_s"), f"{what}.starts_s")
    predicted = r.get("predicted")
    if not isinstance(predicted, list) or len(predicted) != len(starts):
        raise Invalid(f"{what}.predicted does not hold one window per start ({len(starts)})")
    windows = r.get("windows", len(starts))
    if isinstance(windows, bool) or not isinstance(windows, int):
        raise Invalid(f"{what}.windows is not a count")
    shown = []
    for k in _evenly(len(starts), MAX_WINDOWS):
        pos = _vectors(predicted[k], f"{what}.predicted[{k}]")
        shown.append({"start_s": starts[k], "t": _window_times(t, starts[k], len(pos)), "position": pos})
    return {
        "label": label,
        "horizons_s": horizons,
        "median_m": median,
        "p90_m": p90,
        "windows": windows,
        "shown": shown,
    }


def _closed_loop(label: str, c: Any) -> dict[str, Any]:
    what = f"closed_loop.{label}"
    c = _mapping(c, what)
    t = _numbers(c.get("t"), f"{what}.t")
    pos = _vectors(c.get("sim_position"), f"{what}.sim_position", len(t))
    rms = _mapping(c.get("rms_m", {}), f"{what}.rms_m")
    keep = _evenly(len(t), MAX_POINTS)
    out = {
        "label": label,
        "t": [t[k] for k in keep],
        "position": [pos[k] for k in keep],
        "rms_m": {a: _number(rms[a], f"{what}.rms_m.{a}") for a in AXES if a in rms},
        "crashed": bool(c.get("crashed", False)),
    }
    if c.get("object") is not None:
        out["object"] = _closed_loop_object(c["object"], f"{what}.object", len(t), keep)
    return out


def _closed_loop_object(o: Any, what: str, n: int, keep: list[int]) -> dict[str, Any]:
    """A pick-and-place closed loop's object: where the simulation and the log (perception) put it, per step."""
    o = _mapping(o, what)
    sim = _vectors(o.get("sim_position"), f"{what}.sim_position", n)
    logged = _vectors(o.get("log_position"), f"{what}.log_position", n)
    rms = _mapping(o.get("rms_m", {}), f"{what}.rms_m")
    goal = _numbers(o.get("goal"), f"{what}.goal")
    if len(goal) != 3:
        raise Invalid(f"{what}.goal is not [x, y, z]")
    return {
        "sim": [sim[k] for k in keep],
        "log": [logged[k] for k in keep],
        "rms_m": {a: _number(rms[a], f"{what}.rms_m.{a}") for a in AXES if a in rms},
        "goal": goal,
        "sim_in_goal": bool(o.get("sim_in_goal", False)),
    }


def _params(x: Any) -> dict[str, dict[str, float]]:
    out = {}
    for label, p in _mapping(x, "params").items():
        out[str(label)] = {str(k): _number(v, f"params.{label}.{k}") for k, v in _mapping(p, f"params.{label}").items()}
    return out


def _log(entry: Any, i: int) -> dict[str, Any]:
    entry = _mapping(entry, f"logs[{i}]")
    source = entry.get("log")
    if not isinstance(source, str):
        raise Invalid("log (the file it came from) is not a path")
    t = _numbers(entry.get("t"), "t")
    if not t:
        raise Invalid("t is empty")
    pos = _vectors(entry.get("position"), "position", len(t))
    report = entry.get("report", [])
    if not isinstance(report, list):
        raise Invalid("report is not a list of lines")
    open_loop = entry.get("open_loop", [])
    if not isinstance(open_loop, list):
        raise Invalid("open_loop is not a list")
    closed = _mapping(entry.get("closed_loop", {}), "closed_loop")
    keep = _evenly(len(t), MAX_POINTS)
    return {
        "log": source,
        "duration_s": t[-1] - t[0],
        "samples": len(t),
        "t": [t[k] for k in keep],
        "position": [pos[k] for k in keep],
        "report": [str(line) for line in report[:MAX_REPORT_LINES]],
        "open_loop": [_open_loop(r, j, t) for j, r in enumerate(open_loop)],
        "closed_loop": [_closed_loop(str(label), c) for label, c in closed.items()],
        "params": _params(entry.get("params", {})),
    }


def _fit(x: Any, what: str) -> dict[str, dict[str, Any]]:
    out = {}
    for name, p in _mapping(x, what).items():
        p = _mapping(p, f"{what}.{name}")
        interval = _numbers(p.get("interval"), f"{what}.{name}.interval")
        if len(interval) != 2:
            raise Invalid(f"{what}.{name}.interval is not [lo, hi]")
        row: dict[str, Any] = {"value": _number(p.get("value"), f"{what}.{name}.value"), "interval": interval}
        if "nominal" in p:
            row["nominal"] = _number(p["nominal"], f"{what}.{name}.nominal")
        if isinstance(p.get("how"), str):
            row["how"] = p["how"]
        if isinstance(p.get("fitted"), bool):
            row["fitted"] = p["fitted"]
        out[str(name)] = row
    return out


def _read_sysid(entry: Path) -> tuple[dict[str, Any] | None, str | None]:
    """The sibling sysid.yaml's parameters (value, interval, nominal, how), or (None, why it was not read)."""
    try:
        path = _entry_file(entry, "sysid.yaml")
    except Refused as exc:
        return None, f"sysid.yaml not read: {exc}"
    if path is None:
        return None, None
    try:
        if path.stat().st_size > MAX_SYSID_BYTES:
            return None, f"sysid.yaml not read: larger than {MAX_SYSID_BYTES} bytes"
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
        return _fit(_mapping(doc, "sysid.yaml").get("parameters"), "sysid.yaml parameters"), None
    except (OSError, UnicodeDecodeError, yaml.YAMLError, RecursionError) as exc:
        return None, f"sysid.yaml not read: {type(exc).__name__}"
    except Invalid as exc:
        return None, f"sysid.yaml not read: {exc}"


def parameter_rows(fit: Mapping[str, Any] | None, sysid: Mapping[str, Any] | None, params: dict) -> list[dict]:
    """One row per parameter: nominal, fitted value and its interval (replay.json's fit, else sysid.yaml's),
    with sysid.yaml's note on how it was found; parameters only replay's models name have no interval."""
    source = fit if fit is not None else sysid or {}
    nominal = next((p for label, p in params.items() if label == "nominal"), {})
    fitted_model = next((p for label, p in params.items() if label == "fitted"), {})
    names = list(dict.fromkeys([*source, *nominal, *fitted_model]))
    rows = []
    for name in names:
        s = source.get(name, {})
        extra = (sysid or {}).get(name, {})
        nom = nominal.get(name, s.get("nominal", extra.get("nominal")))
        rows.append(
            {
                "name": name,
                "nominal": nom,
                "value": s.get("value", fitted_model.get(name)),
                "interval": s.get("interval"),
                "how": extra.get("how", s.get("how")),
                "fitted": extra.get("fitted", s.get("fitted")),
            }
        )
    return rows


def read_entry(runs_root: Path, name: str) -> dict[str, Any]:
    """``/api/sim2real/entry``: one entry, its logs ready to plot, or its ``invalid`` reason. None of a
    replay.json's content is trusted: every field is checked for the shape replay writes."""
    entry = entry_dir_in(runs_root, name)
    if entry is None:
        return {"name": name, "missing": True, "invalid": "no such sim2real folder"}
    files, refused = _files(name, entry)
    out: dict[str, Any] = {"name": name, "files": files, "refused": refused, "logs": [], "notes": []}
    sysid, note = _read_sysid(entry)
    if note:
        out["notes"].append(note)
    try:
        path = _entry_file(entry, "replay.json")
    except Refused as exc:
        return _invalid(out, f"replay.json refused: {exc}")
    if path is None:
        return _invalid(out, "no replay.json (run robot-rl replay log=... out=<this folder>)")
    try:
        size = path.stat().st_size
        if size > MAX_REPLAY_BYTES:
            return _invalid(out, f"replay.json is {size} bytes, more than the {MAX_REPLAY_BYTES} read")
        doc = json.loads(path.read_bytes())
    except OSError as exc:
        return _invalid(out, f"replay.json not readable: {exc.strerror or exc}")
    except (ValueError, RecursionError) as exc:
        return _invalid(out, f"replay.json is not valid JSON (still being written?): {str(exc)[:120]}")
    try:
        doc = _mapping(doc, "replay.json")
        logs = doc.get("logs")
        if not isinstance(logs, list) or not logs:
            raise Invalid("replay.json has no logs")
        fit = _fit(doc["fit"], "fit") if doc.get("fit") is not None else None
    except Invalid as exc:
        return _invalid(out, f"replay.json is not what robot-rl replay writes: {exc}")
    for i, raw in enumerate(logs):
        try:
            one = _log(raw, i)
            one["parameters"] = parameter_rows(fit, sysid, one["params"])
        except Invalid as exc:
            source = raw.get("log") if isinstance(raw, Mapping) and isinstance(raw.get("log"), str) else f"log {i}"
            log.warning("sim2real %s: %s: %s", name[:200], source[:200], exc)
            one = {"log": source, "invalid": str(exc)}
        out["logs"].append(one)
    out["sysid"] = doc.get("sysid") if isinstance(doc.get("sysid"), str) else None
    out["fit_source"] = "replay.json" if fit is not None else ("sysid.yaml" if sysid is not None else None)
    return out


def _invalid(out: dict[str, Any], reason: str) -> dict[str, Any]:
    log.warning("sim2real %s: %s", out["name"][:200], reason)
    out["invalid"] = reason
    return out
