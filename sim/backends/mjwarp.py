"""MuJoCo Warp (MJWarp): the same MJCF and task code, on warp's CPU device or a GPU (`backend.device`).

MJWarp computes in float32 and the task code in float64. The tensors a task sees (qpos, qvel, act, ctrl, ... and
the per-world model fields of expand()) are float64 torch tensors on the backend's device, mirrors of MJWarp's
arrays: step(), reset() and forward() write the mirrors into MJWarp's arrays first and read the state back after,
each a device-side copy (on a GPU nothing passes through the host). So results differ from the `mujoco` backend by
float32 rounding; tests/sim/test_mjwarp_backend.py states the tolerances.

The substeps of a control period are captured once as a warp graph and replayed (`capture_graph`, default on):
without it a GPU step is launch-bound, and on warp's CPU device replay skips Python's per-kernel launch cost too.
The first call of each kind (substep count, controls held or scheduled) runs uncaptured, which compiles and loads
the kernels; the second captures (`capture_s` records how long), and every later one replays. A graph holds the
addresses of the arrays it reads, so expand() of a new field, which replaces a model array, drops the graphs.
On a GPU warp launches on its own stream: every warp block waits for the torch work queued before it, and torch
waits for it after (`_warp_scope`).

A world whose state diverges (not finite, or beyond mjMAXVAL) is reset inside step() and handed to the env by
take_mujoco_resets(), as mj_step's reset is on the `mujoco` backend. The ToF sensors cast MJWarp's batched rays.
Camera observations of every world come from MJWarp's batch renderer in one call (render_all); render() draws one
world with MuJoCo's renderer. The native Crazyflie firmware is a CPU MuJoCo callback: hover tasks run the torch
firmware on this backend.

Measured on warp's CPU device only: no GPU has run this code yet (docs/benchmarks.md).
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import time

import mujoco
import numpy as np
import torch

from sim.backends.mujoco_batch import STATE_FIELDS, MujocoBatchBackend

DEPTH_RANGE_M = 100.0  # batch-rendered depth beyond this is clipped to it


def _warp():
    try:
        import mujoco_warp as mjw
        import warp as wp
    except ImportError as e:
        raise ValueError(f"backend=mjwarp needs mujoco-warp and warp-lang (the 'warp' extra): {e}") from None
    wp.config.quiet = True
    wp.config.log_level = wp.LOG_WARNING  # not a line per kernel module loaded or compiled
    wp.init()
    return wp, mjw


def buffer_sizes(model: mujoco.MjModel, seconds: float = 1.0) -> tuple[int, int]:
    """Contacts and constraint rows to allocate per world: MJWarp's buffers have a fixed size, and what overflows is
    dropped (an arm's gripper and block lost their contacts at MJWarp's default of 64 rows). Measured on the host:
    the model let go from its initial state for `seconds` (things settle onto what holds them), then twice the most
    seen plus a margin, and never less than MJWarp's own default."""
    d = mujoco.MjData(model)
    most_con, most_efc = 0, 0
    for _ in range(max(1, int(seconds / model.opt.timestep))):
        mujoco.mj_step(model, d)
        most_con, most_efc = max(most_con, d.ncon), max(most_efc, d.nefc)
    return max(2 * most_con + 16, 64), max(2 * most_efc + 64, 256)


class MjWarpBackend:
    """Many worlds of one MjModel in MJWarp; the interface of MujocoBatchBackend (see there)."""

    name = "mjwarp"

    def __init__(
        self, model: mujoco.MjModel, num_worlds: int, nthread: int = 0, device: str = "cpu", capture_graph: bool = True
    ):
        wp, mjw = _warp()
        self._wp, self._mjw = wp, mjw
        self.model = model
        self.num_worlds = int(num_worlds)
        self.wp_device = wp.get_device(device)  # "cpu", "cuda", "cuda:1"
        self.device = torch.device("cpu" if self.wp_device.is_cpu else f"cuda:{self.wp_device.ordinal}")
        with wp.ScopedDevice(self.wp_device):
            self.m = mjw.put_model(model)
            nconmax, njmax = buffer_sizes(model)
            self.d = mjw.make_data(model, nworld=self.num_worlds, nconmax=nconmax, njmax=njmax)
        self._views = {f: wp.to_torch(getattr(self.d, f)) for f in STATE_FIELDS}  # float32, MJWarp's memory
        for f, view in self._views.items():
            setattr(self, f, view.to(torch.float64).clone())
        # field: (float64 mirror, MJWarp's view; None for a field MJWarp does not have, used in rendering only)
        self._expanded: dict[str, tuple[torch.Tensor, torch.Tensor | None]] = {}
        self._pushed_versions: dict[str, int] = {}
        self._diverged = torch.zeros(self.num_worlds, dtype=torch.bool, device=self.device)
        self._any_diverged = False
        self._renderer = None
        self._batch_render = None  # ((camera, width, height, kind), MJWarp's render context, output array)
        # where a batch-rendered ray hits nothing it reads 0; MuJoCo's renderer reads its far plane there
        self._far_plane_m = float(model.vis.map.zfar * model.stat.extent)
        self.capture_graph = bool(capture_graph)
        # (substeps, scheduled controls) -> captured graph; kinds run once uncaptured (kernels compiled and loaded)
        self._graphs: dict[tuple[int, bool], object] = {}
        self._warmed: set[tuple[int, bool]] = set()
        self.capture_s: dict[tuple[int, bool], float] = {}  # seconds each capture took (kept out of the steps)
        self._schedules: dict[int, object] = {}  # substeps -> (substeps, worlds, nu) float32 warp array of controls
        self._ray_exclude: dict[bytes, object] = {}  # body_exclude -> its warp array, made once

    @contextlib.contextmanager
    def _warp_scope(self):
        """warp's calls on the backend's device, ordered after the torch work queued before them and before the
        torch work queued after (on a GPU, warp launches on its own stream and torch on the current one)."""
        wp = self._wp
        with wp.ScopedDevice(self.wp_device):
            if not self.wp_device.is_cuda:
                yield
                return
            torch_stream = wp.stream_from_torch(torch.cuda.current_stream(self.device))
            wp.get_stream().wait_stream(torch_stream)
            yield
            torch_stream.wait_stream(wp.get_stream())

    # -- mirrors -----------------------------------------------------------------------------
    def _push(self) -> None:
        """The mirrors into MJWarp: the state, and the model fields written since they were last pushed."""
        for f, view in self._views.items():
            view.copy_(getattr(self, f))
        for field, (mirror, view) in self._expanded.items():
            if view is not None and mirror._version != self._pushed_versions[field]:  # torch counts in-place writes
                view.copy_(mirror)
                self._pushed_versions[field] = mirror._version

    def _pull(self) -> None:
        for f, view in self._views.items():
            getattr(self, f).copy_(view)

    # -- stepping ------------------------------------------------------------------------------
    def step(self, nsubsteps: int = 1, ctrl: torch.Tensor | None = None, check_divergence: bool = True) -> None:
        """As MujocoBatchBackend.step: nsubsteps physics steps, controls held or ctrl[:, k] before substep k.
        check_divergence=False leaves the bad-state check to a later call: on a GPU the check is a host sync, so
        the env's substep loop checks once per control period (a diverged world runs on to the period's end, apart
        from the others, and is reset there)."""
        if ctrl is not None and tuple(ctrl.shape) != (self.num_worlds, nsubsteps, self.model.nu):
            raise ValueError(
                f"ctrl must be {(self.num_worlds, nsubsteps, self.model.nu)} (worlds, substeps, actuators), "
                f"not {tuple(ctrl.shape)}"
            )
        self._push()
        scheduled = ctrl is not None
        if scheduled:
            if nsubsteps not in self._schedules:
                with self._warp_scope():
                    shape = (nsubsteps, self.num_worlds, self.model.nu)
                    self._schedules[nsubsteps] = self._wp.zeros(shape, dtype=self._wp.float32)
            self._wp.to_torch(self._schedules[nsubsteps]).copy_(ctrl.transpose(0, 1))
        with self._warp_scope():
            self._run_substeps(nsubsteps, scheduled)
        self._pull()
        if not check_divergence:
            return
        # as mj_step does on its bad-state warnings: a world whose state is not finite or beyond mjMAXVAL (1e10) is
        # reset to the model's defaults, and take_mujoco_resets() hands it to the env
        sane = lambda x: (torch.isfinite(x) & (x.abs() < 1e10)).all(dim=1)  # noqa: E731
        diverged = ~(sane(self.qpos) & sane(self.qvel))
        if diverged.any():
            self._diverged |= diverged
            self._any_diverged = True
            self.reset(torch.nonzero(diverged).flatten())
            self.forward()

    def _substeps(self, nsubsteps: int, scheduled: bool) -> None:
        for k in range(nsubsteps):
            if scheduled:
                self._wp.copy(self.d.ctrl, self._schedules[nsubsteps][k])
            self._mjw.step(self.m, self.d)

    def _run_substeps(self, nsubsteps: int, scheduled: bool) -> None:
        """The substeps, replayed from a captured graph once this kind has run (see the module docstring)."""
        key = (nsubsteps, scheduled)
        if not self.capture_graph or key not in self._warmed:
            self._warmed.add(key)
            self._substeps(nsubsteps, scheduled)
            return
        if key not in self._graphs:
            t0 = time.perf_counter()
            with self._wp.ScopedCapture(device=self.wp_device) as capture:
                self._substeps(nsubsteps, scheduled)  # recorded, not run
            self._graphs[key] = capture.graph
            self.capture_s[key] = time.perf_counter() - t0
        self._wp.capture_launch(self._graphs[key])

    def take_mujoco_resets(self) -> torch.Tensor | None:
        """Worlds reset inside step() because their state diverged since the last call (bool, num_worlds), None
        when there were none; clears the record."""
        if not self._any_diverged:  # a Python flag: no host sync when nothing diverged
            return None
        out, self._diverged, self._any_diverged = self._diverged, torch.zeros_like(self._diverged), False
        return out

    def reset(self, ids: torch.Tensor | np.ndarray) -> None:
        """The full state of these worlds back to the model's defaults; then write the new state and forward(ids)."""
        ids = torch.as_tensor(ids, dtype=torch.long, device=self.device).flatten()
        if ids.numel() == 0:
            return
        mask = torch.zeros(self.num_worlds, dtype=torch.bool, device=self.device)
        mask[ids] = True
        self._push()  # the other worlds' pending writes are kept
        with self._warp_scope():
            self._mjw.reset_data(self.m, self.d, reset=self._wp.from_torch(mask))
        self._pull()

    def forward(self, ids: torch.Tensor | np.ndarray | None = None) -> None:
        """Positions and velocities of every world made current (MJWarp computes all worlds at once)."""
        if ids is not None and len(ids) == 0:
            return
        self._push()
        with self._warp_scope():
            self._mjw.forward(self.m, self.d)

    def derived(self, field: str) -> torch.Tensor:
        """A derived MjData field (sensordata, xpos, ...) of every world, float64, as of the last step or forward."""
        if field in STATE_FIELDS:
            raise ValueError(f"'{field}' is a state field: use backend.{field}")
        return self._wp.to_torch(getattr(self.d, field)).to(torch.float64).clone()

    def ray(self, pnt: torch.Tensor, vec: torch.Tensor, body_exclude: np.ndarray, ids: torch.Tensor) -> torch.Tensor:
        """As MujocoBatchBackend.ray. MJWarp casts in every world at once: the other worlds get the rays of the
        first id (their results are dropped); kinematics are computed from the current state first, as mujoco's
        ray does."""
        wp, ids = self._wp, torch.as_tensor(ids, dtype=torch.long, device=self.device)
        nray = pnt.shape[1]
        full_pnt = pnt[:1].expand(self.num_worlds, nray, 3).clone()
        full_vec = vec[:1].expand(self.num_worlds, nray, 3).clone()
        full_pnt[ids], full_vec[ids] = pnt, vec
        # the torch work done before the warp scope, which orders warp after it on a GPU
        pnt32, vec32 = full_pnt.to(self.device, torch.float32), full_vec.to(self.device, torch.float32)
        exclude = np.asarray(body_exclude, dtype=np.int32)
        key = exclude.tobytes()
        self._push()
        with self._warp_scope():
            if key not in self._ray_exclude:
                self._ray_exclude[key] = wp.array(exclude)
            self._mjw.kinematics(self.m, self.d)
            dist = wp.zeros((self.num_worlds, nray), dtype=wp.float32)
            geom = wp.zeros((self.num_worlds, nray), dtype=wp.int32)
            normal = wp.zeros((self.num_worlds, nray), dtype=wp.vec3f)
            self._mjw.rays(
                self.m,
                self.d,
                wp.from_torch(pnt32, dtype=wp.vec3f),
                wp.from_torch(vec32, dtype=wp.vec3f),
                wp.types.vector(6, wp.float32)(*([-1.0] * 6)),  # no group filter: every geom
                True,
                self._ray_exclude[key],
                dist,
                geom,
                normal,
            )
        return wp.to_torch(dist)[ids].to(torch.float64)

    # -- per-world model parameters ---------------------------------------------------------
    def expand(self, field: str) -> torch.Tensor:
        """Writable per-world values of a model field (float64 mirror of a batched MJWarp array)."""
        if field not in self._expanded and not hasattr(self.m, field):  # a field of rendering only (site_rgba)
            host = torch.as_tensor(np.asarray(getattr(self.model, field)), dtype=torch.float64, device=self.device)
            self._expanded[field] = (host.unsqueeze(0).repeat(self.num_worlds, *[1] * host.dim()), None)
            self._pushed_versions[field] = 0
        if field not in self._expanded:
            wp = self._wp
            shared = getattr(self.m, field)  # leading dimension 1: one value for every world
            host = shared.numpy()
            batched = wp.array(np.repeat(host[:1], self.num_worlds, axis=0), dtype=shared.dtype, device=self.wp_device)
            setattr(self.m, field, batched)
            self._graphs.clear()  # they read the array this one replaces
            view = wp.to_torch(batched)
            mirror = view.to(torch.float64).clone()
            self._expanded[field] = (mirror, view)
            self._pushed_versions[field] = mirror._version
        return self._expanded[field][0]

    def set_const(self, ids: torch.Tensor | np.ndarray | None = None) -> None:
        """Derived constants of every world recomputed after masses or inertias changed."""
        self._push()
        with self._warp_scope():
            self._mjw.set_const(self.m, self.d)
        self._pull()

    # -- inspection -------------------------------------------------------------------------
    def state_hash(self) -> str:
        h = hashlib.sha256()
        for f in STATE_FIELDS:
            h.update(getattr(self, f).cpu().numpy().tobytes())
        return h.hexdigest()

    def world_data(self, world: int) -> tuple[mujoco.MjModel, mujoco.MjData]:
        """One world as a MuJoCo model (with its per-world fields) and forward-computed data, e.g. to render it."""
        self._push()
        m = copy.copy(self.model)
        for field, (mirror, _) in self._expanded.items():
            getattr(m, field)[...] = mirror[world].cpu().numpy().reshape(getattr(m, field).shape)
        d = mujoco.MjData(m)
        self._mjw.get_data_into(d, m, self.d, world)
        mujoco.mj_forward(m, d)
        return m, d

    render = MujocoBatchBackend.render  # one world through world_data and MuJoCo's renderer

    def render_all(self, camera: str, width: int, height: int, kind: str = "rgb") -> torch.Tensor:
        """As MujocoBatchBackend.render_all, through MJWarp's batch renderer: every world in one call, the images
        left on the device. It draws geoms, not sites (a target drawn as a site is not in its images), and shades
        in its own way, so its RGB is not MuJoCo's; its depth is MuJoCo's (tests/sim/test_mjwarp_backend.py holds both
        to MuJoCo's renderer). The render context is built on the
        first call for a camera, size and kind (kept out of the step; a new one replaces it)."""
        if kind not in ("rgb", "depth"):
            raise ValueError(f"unknown render kind '{kind}' (rgb, depth)")
        cam = mujoco.mj_name2id(self.model, mujoco.mjtObj.mjOBJ_CAMERA, camera)
        if cam < 0:
            raise ValueError(f"no camera '{camera}' in the model")
        wp, mjw = self._wp, self._mjw
        key = (cam, int(width), int(height), kind)
        if self._batch_render is None or self._batch_render[0] != key:
            with self._warp_scope():
                rc = mjw.create_render_context(
                    self.model,
                    nworld=self.num_worlds,
                    cam_res=(int(width), int(height)),
                    render_rgb=kind == "rgb",
                    render_depth=kind == "depth",
                    cam_active=[cam],
                )
                out = wp.zeros((self.num_worlds, int(height), int(width)), dtype=wp.vec3f if kind == "rgb" else float)
            self._batch_render = (key, rc, out)
        _, rc, out = self._batch_render
        self._push()
        with self._warp_scope():
            mjw.kinematics(self.m, self.d)
            mjw.camlight(self.m, self.d)
            mjw.refit_bvh(self.m, self.d, rc)
            mjw.render(self.m, self.d, rc)
            if kind == "rgb":
                mjw.get_rgb(rc, 0, out)
            else:
                mjw.get_depth(rc, 0, DEPTH_RANGE_M, out)  # clamped to [0, 1] of this range
        x = wp.to_torch(out)
        if kind == "rgb":
            return x.clone()
        return torch.where(x > 0.0, x * DEPTH_RANGE_M, self._far_plane_m)

    def close(self) -> None:
        if self._renderer is not None:
            self._renderer.close()
            self._renderer = None
