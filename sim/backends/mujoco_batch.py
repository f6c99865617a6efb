"""CPU backend on mujoco.batch.Batch: N worlds on a thread pool, bit-identical to a loop.

State fields (qpos, qvel, act, ctrl, time, xfrc_applied) are live float64 numpy rows of the
batch; torch.from_numpy gives tensors over the same memory, so task code reads and writes the
simulation without copies.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import mujoco
import mujoco.batch
import numpy as np
import torch

STATE_FIELDS = ("qpos", "qvel", "act", "ctrl", "time", "xfrc_applied", "qacc_warmstart", "mocap_pos", "mocap_quat")
_TIME = int(mujoco.mjtState.mjSTATE_TIME)


class ModelError(ValueError):
    """An MJCF file that does not compile; the message is MuJoCo's, on one line."""


def load_model(path: str | Path) -> mujoco.MjModel:
    path = Path(path)
    if not path.is_file():
        raise ModelError(f"MJCF file not found: {path}")
    try:
        return mujoco.MjModel.from_xml_path(str(path))
    except ValueError as e:
        raise ModelError(f"{path.name} does not compile: {' '.join(str(e).split())}") from None


class MujocoBatchBackend:
    """Many worlds of one MjModel. Per-world model parameters via expand(); rendering via get_data()."""

    name = "mujoco"

    def __init__(self, model: mujoco.MjModel, num_worlds: int, nthread: int = 0, device: str = "cpu"):
        if device != "cpu":
            raise ValueError("the mujoco backend runs on the CPU; use backend=mjwarp for GPUs")
        self.model = model
        self.num_worlds = int(num_worlds)
        self.batch = mujoco.batch.Batch(model, self.num_worlds, nthread=nthread)
        self.device = torch.device("cpu")
        self._np = {f: self.batch.bind(f) for f in STATE_FIELDS}
        for name, arr in self._np.items():
            setattr(self, name, torch.from_numpy(arr))  # zero-copy views
        self._expanded: dict[str, torch.Tensor] = {}
        self._mujoco_resets = np.zeros(self.num_worlds, dtype=bool)
        self._renderer = None

    # -- stepping ---------------------------------------------------------------------------
    def step(self, nsubsteps: int = 1, ctrl: torch.Tensor | None = None, check_divergence: bool = True) -> None:
        """Advance every world; state fields are current afterwards (derived fields are not used).

        ctrl: None holds the current controls; else (num_worlds, nsubsteps, nu) controls, row k written before
        substep k: bit-identical to nsubsteps step(1) calls with ctrl[:, k] written before each, in one pass
        over the worlds (each call loads and saves every world's state, a cost of its own).
        check_divergence: MuJoCo checks inside each mj_step at no cost, so it is always on here.
        """
        t0 = self._np["time"].copy()
        if ctrl is None:
            self.batch.step(nstep=nsubsteps)
        else:
            self._step_controls(nsubsteps, ctrl)
        self._check()
        # mj_step resets a world whose state diverged (a MuJoCo warning) and steps on from the model's defaults;
        # its clock restarts, which is how such a world shows: take_mujoco_resets() hands them to the env
        self._mujoco_resets |= self._np["time"] - t0 < (nsubsteps - 0.5) * self.model.opt.timestep

    def take_mujoco_resets(self) -> torch.Tensor | None:
        """Worlds MuJoCo reset inside step() since the last call (bool, num_worlds), None when there were none;
        clears the record."""
        if not self._mujoco_resets.any():
            return None
        out = torch.from_numpy(self._mujoco_resets.copy())
        self._mujoco_resets[:] = False
        return out

    def _step_controls(self, k: int, ctrl: torch.Tensor) -> None:
        shape = (self.num_worlds, k, self.model.nu)
        if tuple(ctrl.shape) != shape:
            raise ValueError(f"ctrl must be {shape} (worlds, substeps, actuators), not {tuple(ctrl.shape)}")
        ctrl = np.ascontiguousarray(ctrl.detach().cpu().numpy(), dtype=np.float64)
        time = self.batch.rollout(k, control=ctrl, record=(_TIME,))[_TIME][..., 0]
        # a rollout stops a world after a substep that raised a MuJoCo warning (mj_step resets a diverged world
        # and goes on); such a world's time repeats from there: finish its substeps as single steps
        stopped = np.nonzero(time[:, -1] == time[:, -2])[0] if k > 1 else ()
        for w in stopped:
            done = k - int(np.count_nonzero(time[w, 1:] == time[w, :-1]))
            for s in range(done, k):
                self._np["ctrl"][w] = ctrl[w, s]
                self.batch.step(ids=[w], nstep=1)

    def _check(self) -> None:
        qpos = self._np["qpos"]
        # one reduction without temporaries: a NaN or Inf anywhere makes the sum non-finite (an overflowing
        # sum of finite values only costs the exact check below)
        if not np.isfinite(qpos.sum()) and not np.all(np.isfinite(qpos)):
            bad = np.nonzero(~np.all(np.isfinite(qpos), axis=1))[0]
            raise FloatingPointError(f"simulation diverged in worlds {bad[:8].tolist()}")

    def reset(self, ids: torch.Tensor | np.ndarray) -> None:
        """Reset the full integration state (time, act, warm start, ...) of worlds to the model defaults.

        The caller then writes the new state and calls forward(ids).
        """
        ids = np.asarray(ids.cpu() if isinstance(ids, torch.Tensor) else ids, dtype=np.int64)
        if ids.size:
            self.batch.reset(ids=ids, stage=mujoco.mjtStage.mjSTAGE_NONE)

    def forward(self, ids: torch.Tensor | np.ndarray | None = None) -> None:
        if ids is not None:
            ids = np.asarray(ids.cpu() if isinstance(ids, torch.Tensor) else ids, dtype=np.int64)
            if ids.size == 0:
                return
        self.batch.forward(ids=ids)

    def derived(self, field: str) -> torch.Tensor:
        """Current values of a derived MjData field (sensordata, actuator_force, xpos), (num_worlds, ...), a copy.

        Refreshed by every step/forward once the field has been asked for (ask once at set-up: it is zero
        until the next call); after step() they describe the state before the last substep, as after mj_step.
        """
        if field in STATE_FIELDS:
            raise ValueError(f"'{field}' is a state field: use backend.{field}")
        return torch.tensor(self.batch.bind(field), device=self.device)

    def ray(self, pnt: torch.Tensor, vec: torch.Tensor, body_exclude: np.ndarray, ids: torch.Tensor) -> torch.Tensor:
        """Distances along rays in worlds ids from their current state: pnt, vec (len(ids), nray, 3) world frame,
        body_exclude (nray,) the body whose geoms each ray ignores (-1: none); (len(ids), nray), -1 for a miss."""
        dist, _ = self.batch.ray(
            np.ascontiguousarray(pnt.numpy()),
            np.ascontiguousarray(vec.numpy()),
            bodyexclude=np.broadcast_to(body_exclude, (len(ids), len(body_exclude))).copy(),
            ids=np.asarray(ids, dtype=np.int64),
        )
        return torch.from_numpy(dist)

    # -- per-world model parameters ---------------------------------------------------------
    def expand(self, field: str) -> torch.Tensor:
        """Writable per-world values of a model field, e.g. 'body_mass', 'actuator_dynprm'."""
        if field not in self._expanded:
            self._expanded[field] = torch.from_numpy(self.batch.expand(field))
        return self._expanded[field]

    def set_const(self, ids: torch.Tensor | np.ndarray | None = None) -> None:
        """Recompute derived constants after changing masses or inertias (of these worlds, or all)."""
        if ids is not None:
            ids = np.asarray(ids.cpu() if isinstance(ids, torch.Tensor) else ids, dtype=np.int64)
            if ids.size == 0:
                return
        self.batch.set_const(ids)

    # -- inspection -------------------------------------------------------------------------
    def state_hash(self) -> str:
        """Hash of the integration state of all worlds, for determinism checks."""
        h = hashlib.sha256()
        for f in STATE_FIELDS:
            h.update(np.ascontiguousarray(self._np[f]).tobytes())
        return h.hexdigest()

    def world_data(self, world: int) -> tuple[mujoco.MjModel, mujoco.MjData]:
        """One world's model (with its randomized parameters) and forward-computed data."""
        m = self.batch.get_model(world)
        d = self.batch.get_data(world)
        mujoco.mj_forward(m, d)
        return m, d

    def render(
        self, world: int, camera: str | int = -1, width: int = 320, height: int = 240, kind: str = "rgb"
    ) -> np.ndarray:
        """RGB (h, w, 3) uint8, depth (h, w) metres, or segmentation (h, w) geom ids of one world."""
        m, d = self.world_data(world)
        if self._renderer is None or self._renderer.width != width or self._renderer.height != height:
            if self._renderer is not None:
                self._renderer.close()
            self._renderer = mujoco.Renderer(m, height=height, width=width)
        r = self._renderer
        r.disable_depth_rendering()
        r.disable_segmentation_rendering()
        if kind == "depth":
            r.enable_depth_rendering()
        elif kind == "segmentation":
            r.enable_segmentation_rendering()
        elif kind != "rgb":
            raise ValueError(f"unknown render kind '{kind}' (rgb, depth, segmentation)")
        r.update_scene(d, camera=camera)
        img = r.render()
        return img[..., 0].copy() if kind == "segmentation" else img.copy()

    def render_all(self, camera: str, width: int, height: int, kind: str = "rgb") -> torch.Tensor:
        """Every world's image from one camera: RGB (n, h, w, 3) float32 in [0, 1] or depth (n, h, w) float32 in
        metres, on the backend's device. Here one world at a time through MuJoCo's renderer."""
        if kind not in ("rgb", "depth"):
            raise ValueError(f"unknown render kind '{kind}' (rgb, depth)")
        imgs = np.stack([self.render(w, camera, width, height, kind) for w in range(self.num_worlds)])
        x = torch.from_numpy(imgs)
        return x.float() / 255.0 if kind == "rgb" else x.float()

    def close(self) -> None:
        if self._renderer is not None:
            self._renderer.close()
            self._renderer = None
