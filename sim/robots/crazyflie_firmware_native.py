"""The Crazyflie firmware tick as a native MuJoCo control callback: physics and firmware in one batch call.

CrazyflieFirmware (torch) runs between physics substeps, so a control period of 5 substeps costs 5 batch
calls and ~40 small torch calls in Python. Here the same tick (crazyflie_firmware_native.c, the same
arithmetic in float64) is installed as mjcb_control around one `batch.step(nstep=substeps)`: MuJoCo's
threads run the firmware of each world right before its actuation, without the GIL.

Per-world firmware state, DR parameters, gains, latency and the commands in flight live in MjData.userdata
(MuJoCo's threads call the callback with a world's model and data only, so that is its memory), which the
batch keeps in each world's state row (the model needs nuserdata >= NUSERDATA:
model_with_userdata). The library is built with the system C compiler at first use, into a cache keyed by
the source, the compiler and the MuJoCo version; without a compiler, load() returns None and says so once.
"""

from __future__ import annotations

import ctypes
import dataclasses
import functools
import hashlib
import logging
import os
import re
import shutil
import subprocess
import tempfile
import threading
from contextlib import contextmanager
from pathlib import Path

import mujoco
import numpy as np
import torch

from sim.backends.mujoco_batch import load_model
from sim.robots.crazyflie_firmware import PidGains, written_key
from sim.scene_files import write_scene

log = logging.getLogger(__name__)

SOURCE = Path(__file__).with_suffix(".c")
# no fast-math, no fused multiply-add: each operation rounded as torch rounds it
CFLAGS = ["-O2", "-fPIC", "-shared", "-std=c11", "-fno-fast-math", "-ffp-contract=off"]

# userdata layout of one world; crazyflie_firmware_native.c defines the same, and load() compares them
MARKER, MODE, SUBSTEP, SUBSTEPS, LATENCY = 0, 1, 2, 3, 4
GAINS, GAIN_SCALE, KF_SCALE, ATT_INT, RATE_INT, RATE_PREV_ERR, CMD_HIST = 5, 15, 18, 19, 21, 24, 27
NUSERDATA = 43
HISTORY = 4
LAYOUT = (
    MARKER,
    MODE,
    SUBSTEP,
    SUBSTEPS,
    LATENCY,
    GAINS,
    GAIN_SCALE,
    KF_SCALE,
    ATT_INT,
    RATE_INT,
    RATE_PREV_ERR,
    CMD_HIST,
    NUSERDATA,
    HISTORY,
)
MAGIC = 4242.0625
PARAMS_END = ATT_INT  # columns before it are parameters, written by Python; after it, state
MODES = {"rpyt": 0.0, "ctbr": 1.0, "motors": 2.0}


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "robot_rl" / "native"


def _build(cc: str) -> Path:
    """The shared library for this source, compiler and MuJoCo, compiled once; concurrent builders each write
    their own temporary file and rename it into place (atomic), so a reader never sees a partial library."""
    include = Path(mujoco.__file__).parent / "include"
    key = hashlib.sha256()
    for part in (
        SOURCE.read_bytes(),
        mujoco.__version__.encode(),
        os.path.realpath(cc).encode(),
        *map(str.encode, CFLAGS),
    ):
        key.update(part + b"\0")
    name = f"crazyflie_firmware_{key.hexdigest()[:16]}.so"
    for d in (cache_dir(), Path(tempfile.gettempdir()) / "robot_rl_native"):  # a read-only home: the temp dir
        try:
            d.mkdir(parents=True, exist_ok=True)
        except OSError:
            continue
        path = d / name
        if path.is_file():
            return path
        if not os.access(d, os.W_OK):
            continue
        tmp = d / f".{name}.{os.getpid()}.tmp"
        cmd = [cc, *CFLAGS, f"-I{include}", "-o", str(tmp), str(SOURCE), "-lm"]
        res = subprocess.run(cmd, capture_output=True, text=True)
        if res.returncode != 0:
            tmp.unlink(missing_ok=True)
            msg = (res.stderr.strip().splitlines() or ["no output"])[0]
            raise RuntimeError(f"{cc} failed on {SOURCE.name}: {msg}")
        os.replace(tmp, path)
        return path
    raise RuntimeError(f"no writable cache directory for the native firmware ({cache_dir()})")


@functools.lru_cache(maxsize=1)
def load() -> ctypes.CDLL | None:
    """The native firmware library, or None (logged once) where it cannot be built or does not match."""
    cc = shutil.which(os.environ.get("CC", "gcc"))
    try:
        if cc is None:
            raise RuntimeError("no C compiler (gcc) found")
        lib = ctypes.CDLL(str(_build(cc)))
        layout = tuple((ctypes.c_int * len(LAYOUT)).in_dll(lib, "cf_layout"))
        if layout != LAYOUT or ctypes.c_double.in_dll(lib, "cf_magic").value != MAGIC:
            raise RuntimeError(f"library layout {layout} is not {LAYOUT}")
    except (OSError, RuntimeError) as e:
        log.warning("crazyflie firmware: native callback unavailable (%s); running the torch firmware (slower)", e)
        return None
    p = ctypes.POINTER(ctypes.c_double)
    lib.cf_tick_many.argtypes = [ctypes.c_int, p, p, p, ctypes.c_double, p]
    lib.cf_tick_many.restype = None
    return lib


_install_lock = threading.Lock()
_install_depth = 0  # steps in flight with the callback installed (envs stepped from several threads)
_install_saved = None  # the callback before the first of them


@contextmanager
def control_callback(fn):
    """mjcb_control set to fn for the block, and what was there before put back after it (also on errors).
    The callback is process-global and batch steps release the GIL: steps of several envs in several threads
    overlap, so the first to enter installs and the last to leave restores (fn is then the same function)."""
    global _install_depth, _install_saved
    with _install_lock:
        if _install_depth == 0:
            _install_saved = mujoco.get_mjcb_control()
            mujoco.set_mjcb_control(fn)
        _install_depth += 1
    try:
        yield
    finally:
        with _install_lock:
            _install_depth -= 1
            if _install_depth == 0:
                mujoco.set_mjcb_control(_install_saved)
                _install_saved = None


def model_with_userdata(xml_path: str | Path) -> Path:
    """The MJCF at xml_path with <size nuserdata="NUSERDATA"/> added, written once to the temp dir (write_scene;
    the Crazyflie model names no asset files)."""
    load_model(xml_path)  # a broken model is reported under its own name, not the copy's
    xml = Path(xml_path).read_text()
    head = re.search(r"<mujoco\b[^>]*>", re.sub(r"<!--.*?-->", lambda m: " " * len(m.group()), xml, flags=re.S))
    if head is None:
        raise ValueError(f"{xml_path} has no <mujoco> element")
    xml = f'{xml[: head.end()]}\n  <size nuserdata="{NUSERDATA}"/>{xml[head.end() :]}'
    return write_scene(xml, f"{Path(xml_path).stem}_firmware")


def constants(mode: str, substeps: int, gains: PidGains, gain_scale, kf_scale, latency) -> np.ndarray:
    """Userdata columns [0, PARAMS_END) of k worlds: the marker and every parameter (SUBSTEP zero), (k, PARAMS_END)."""
    gain_scale = np.asarray(gain_scale, dtype=np.float64).reshape(-1, 3)
    c = np.empty((len(gain_scale), PARAMS_END))
    c[:, MARKER], c[:, MODE], c[:, SUBSTEP], c[:, SUBSTEPS] = MAGIC, MODES[mode], 0.0, float(substeps)
    c[:, LATENCY] = np.asarray(latency, dtype=np.float64).reshape(-1)
    c[:, GAINS:GAIN_SCALE] = [getattr(gains, f.name) for f in dataclasses.fields(gains)]  # the C code's order
    c[:, GAIN_SCALE:KF_SCALE] = gain_scale
    c[:, KF_SCALE] = np.asarray(kf_scale, dtype=np.float64).reshape(-1)
    return c


class NativeFirmware:
    """CrazyflieFirmware's interface (gain_scale, kf_scale, att_int, rate_int, rate_prev_err, reset, state) over
    the userdata of a MujocoBatchBackend whose model has nuserdata >= NUSERDATA, plus cmd_hist, the commands in
    flight (n, HISTORY, 4), and step(), which flies one control period.

    gain_scale and kf_scale are plain tensors, the masters: they are written into userdata when they or the
    latency tensor have been written to (written_key), and at reset, since a batch reset zeroes userdata. The
    state tensors and cmd_hist are views of userdata: the callback updates them in place.
    """

    def __init__(
        self, backend, lib: ctypes.CDLL, mode: str, substeps: int, latency: torch.Tensor, gains: PidGains | None = None
    ):
        if backend.model.nuserdata < NUSERDATA:
            raise ValueError(f"the model needs nuserdata >= {NUSERDATA} (model_with_userdata)")
        n = backend.num_worlds
        self.backend, self.mode, self.substeps, self.n = backend, mode, int(substeps), n
        self.gains = gains or PidGains()
        self.latency = latency  # the task's tensor (substeps per world), written in place at resets
        self._control = lib.cf_control  # keeps the library loaded while installed
        self._ud = backend.batch.bind("userdata")[:, :NUSERDATA]  # (n, NUSERDATA), live rows of the batch
        # one torch.from_numpy per view: each then has its own write counter, so a write to the state does not
        # look like a write to another view (written_key)
        self.att_int = torch.from_numpy(self._ud[:, ATT_INT : ATT_INT + 2])
        self.rate_int = torch.from_numpy(self._ud[:, RATE_INT : RATE_INT + 3])
        self.rate_prev_err = torch.from_numpy(self._ud[:, RATE_PREV_ERR : RATE_PREV_ERR + 3])
        hist = self._ud[:, CMD_HIST : CMD_HIST + 4 * HISTORY].reshape(n, HISTORY, 4)
        assert np.shares_memory(hist, self._ud)
        self.cmd_hist = torch.from_numpy(hist)
        self.gain_scale = torch.ones(n, 3, dtype=torch.float64, device=backend.device)
        self.kf_scale = torch.ones(n, 1, dtype=torch.float64, device=backend.device)
        self._key = None
        self._pack(slice(None))

    def _pack(self, ids) -> None:
        """Write the parameters of worlds ids (a slice, or indices) into their userdata, in one strided copy."""
        if isinstance(ids, torch.Tensor):
            ids = ids.cpu().numpy()
        self._ud[ids, :PARAMS_END] = constants(
            self.mode,
            self.substeps,
            self.gains,
            self.gain_scale[ids].numpy(),
            self.kf_scale[ids].numpy(),
            self.latency[ids].numpy(),
        )

    def reset(self, ids: torch.Tensor) -> None:
        """Zero the state of these worlds and write their parameters (after a batch reset, which zeroes them)."""
        self._pack(ids)
        self.att_int[ids] = 0.0
        self.rate_int[ids] = 0.0
        self.rate_prev_err[ids] = 0.0

    def state(self) -> list[torch.Tensor]:
        return [self.att_int, self.rate_int, self.rate_prev_err]

    @contextmanager
    def ticking(self):
        """While one control period's substeps run: the firmware ticks inside each, with the commands in
        cmd_hist. mjcb_control is process-global: installed for this period only, the previous one restored; the
        C function leaves worlds without the marker alone (other models stepped meanwhile, forward calls)."""
        key = written_key(self.gain_scale, self.kf_scale, self.latency)
        if key is None or key != self._key:
            self._pack(slice(None))
            self._key = key
        self._ud[:, SUBSTEP] = 0.0
        with control_callback(self._control):
            yield
        # mj_step resets a world after a warning (diverging state), userdata included: parameters back
        lost = np.flatnonzero(self._ud[:, MARKER] != MAGIC)
        if lost.size:
            self._pack(lost)


def tick_many(lib: ctypes.CDLL, quat: np.ndarray, gyro: np.ndarray, ud: np.ndarray, dt: float) -> np.ndarray:
    """One firmware tick of the C code over rows of arrays (no MuJoCo model): motor thrusts (n, 4); ud is
    updated in place. For tests."""
    quat, gyro = (np.ascontiguousarray(a, dtype=np.float64) for a in (quat, gyro))
    if not (ud.flags.c_contiguous and ud.dtype == np.float64 and ud.shape[1] == NUSERDATA):
        raise ValueError(f"ud must be C-contiguous float64 (n, {NUSERDATA})")
    out = np.zeros((len(quat), 4))
    p = lambda a: a.ctypes.data_as(ctypes.POINTER(ctypes.c_double))  # noqa: E731
    lib.cf_tick_many(len(quat), p(quat), p(gyro), p(ud), dt, p(out))
    return out
