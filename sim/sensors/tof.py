"""Time-of-flight range sensors for Crazyflie teams, by batched ray casting (mujoco.batch.Batch.ray).

Two layouts (crazyflie_ros2_facts.md sections 1.1 and 2.7):
- `vl53l5cx_row`: LEARN's deck, four VL53L5CX (front, right, back, left), each reporting one row of
  its 8x8 grid: 8 zones across a ~45 degree field of view, range up to 4 m, ~15 Hz in 8x8 mode.
  The observation is floored to centimetres and clipped at 2.0 m; invalid zones read the clip value.
- `multiranger`: Bitcraze Multi-ranger deck, 5 VL53L1x beams (front, back, left, right, up), 10 Hz.
One ray per zone, through the zone centre, at zero elevation (the middle of the 8x8 grid lies
between rows 3 and 4, 2.8 degrees either side). All rays of all drones of all due worlds go into a
single `ray` call: no Python loop over rays, drones or worlds.

Update-rate holding: each world's sensors refresh on their own clock with a random phase, and the
reading holds between refreshes, as an I2C-polled sensor read at 100 Hz by the control loop does.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch


@dataclass
class RangeSensorConfig:
    yaw_deg: tuple[float, ...]  # per beam, body frame, 0 = +x (front), +90 = +y (left)
    pitch_deg: tuple[float, ...]  # per beam, +90 = up
    max_range: float = 4.0  # beyond this the sensor reports an invalid zone
    clip: float = 2.0  # observation ceiling; invalid zones read it too
    rate_hz: float = 15.0
    noise_std: float = 0.01  # m, Gaussian, plus noise_rel * distance
    noise_rel: float = 0.01
    dropout_prob: float = 0.0  # probability that a zone is invalid at a refresh
    yaw_noise_std: float = 0.0  # rad, per sensor and refresh (LEARN's sim uses 0.1 on scan angles)
    floor_cm: bool = True  # the firmware floors metres to centimetres
    mount_radius: float = 0.02  # m from the body centre to the sensor, along the sensor's axis
    mount_yaw_deg: tuple[float, ...] | None = None  # per beam, the sensor's axis; None: the beam itself


def vl53l5cx_row(fov_deg: float = 45.0, zones: int = 8, **kw) -> RangeSensorConfig:
    """Four 8-zone rows: front, right, back, left; zones ordered left to right as the sensor sees them."""
    mounts = (0.0, -90.0, 180.0, 90.0)
    offsets = [fov_deg / 2 - (k + 0.5) * fov_deg / zones for k in range(zones)]
    yaws = tuple(m + o for m in mounts for o in offsets)
    axes = tuple(m for m in mounts for _ in offsets)
    return RangeSensorConfig(yaw_deg=yaws, pitch_deg=(0.0,) * len(yaws), mount_yaw_deg=axes, **kw)


def multiranger(**kw) -> RangeSensorConfig:
    kw.setdefault("rate_hz", 10.0)  # multiranger.c polls every 100 ms
    return RangeSensorConfig(yaw_deg=(0.0, 180.0, 90.0, -90.0, 0.0), pitch_deg=(0.0, 0.0, 0.0, 0.0, 90.0), **kw)


SENSOR_LAYOUTS = {"vl53l5cx_row": vl53l5cx_row, "multiranger": multiranger}


def quat_wxyz_to_rotmat(q: torch.Tensor) -> torch.Tensor:
    w, x, y, z = (q / q.norm(dim=-1, keepdim=True)).unbind(-1)
    return torch.stack(
        [
            1 - 2 * (y * y + z * z),
            2 * (x * y - w * z),
            2 * (x * z + w * y),
            2 * (x * y + w * z),
            1 - 2 * (x * x + z * z),
            2 * (y * z - w * x),
            2 * (x * z - w * y),
            2 * (y * z + w * x),
            1 - 2 * (x * x + y * y),
        ],
        dim=-1,
    ).reshape(q.shape[:-1] + (3, 3))


class RangeSensors:
    """Range beams on every drone of every world; read() returns held observations (W, N, B) in metres.

    body_ids: the MuJoCo body id of each drone (N,), so a drone's rays ignore its own geoms.
    sensors_per_drone groups beams that share one refresh clock and one yaw error (4 for the ToF deck).
    """

    def __init__(
        self,
        cfg: RangeSensorConfig,
        num_worlds: int,
        body_ids: list[int],
        control_dt: float,
        rng: torch.Generator,
        sensors_per_drone: int = 4,
    ):
        self.cfg, self.dt, self.rng = cfg, control_dt, rng
        self.device = rng.device  # the sensors' tensors live where their generator draws
        self.W, self.N, self.B = num_worlds, len(body_ids), len(cfg.yaw_deg)
        self.yaw = torch.deg2rad(torch.tensor(cfg.yaw_deg, dtype=torch.float64, device=self.device))
        self.pitch = torch.deg2rad(torch.tensor(cfg.pitch_deg, dtype=torch.float64, device=self.device))
        self.group = torch.arange(self.B, device=self.device) * sensors_per_drone // self.B  # beam -> sensor index
        self.sensors_per_drone = sensors_per_drone
        self.body_exclude = np.repeat(np.asarray(body_ids, dtype=np.int32), self.B)  # (N * B,)
        self.held = torch.full((num_worlds, self.N, self.B), cfg.clip, dtype=torch.float64, device=self.device)
        self.true_dist = torch.full_like(self.held, math.inf)  # last raw hit distance (inf: no hit), for tests
        self.time = torch.zeros(num_worlds, dtype=torch.float64, device=self.device)
        self.next_refresh = torch.zeros(num_worlds, dtype=torch.float64, device=self.device)
        self.period = 1.0 / cfg.rate_hz
        mount = torch.deg2rad(torch.tensor(cfg.mount_yaw_deg or cfg.yaw_deg, dtype=torch.float64, device=self.device))
        cp = torch.cos(self.pitch)
        self.mount_offset = cfg.mount_radius * torch.stack(
            [cp * torch.cos(mount), cp * torch.sin(mount), torch.sin(self.pitch)], -1
        )  # (B, 3) body frame

    def reset(self, ids: torch.Tensor) -> None:
        """Refresh at the next read (a reading is always available) and draw a new clock phase."""
        self.time[ids] = 0.0
        self.next_refresh[ids] = 0.0

    def _directions(self, n: int) -> torch.Tensor:
        """Beam unit vectors in the body frame, (n, N, B, 3), with a per-sensor yaw error."""
        yaw = self.yaw.expand(n, self.N, self.B)
        if self.cfg.yaw_noise_std > 0:
            err = self.cfg.yaw_noise_std * torch.randn(
                n, self.N, self.sensors_per_drone, generator=self.rng, dtype=torch.float64, device=self.device
            )
            yaw = yaw + err[:, :, self.group]
        cp = torch.cos(self.pitch)
        return torch.stack([cp * torch.cos(yaw), cp * torch.sin(yaw), torch.sin(self.pitch).expand_as(yaw)], -1)

    def read(self, backend, pos: torch.Tensor, quat: torch.Tensor, advance: bool = True) -> torch.Tensor:
        """Cast rays in the worlds whose refresh is due, hold the rest; pos (W, N, 3), quat (W, N, 4) wxyz.

        Call once per control step (advance=True moves each world's clock by one control period).
        """
        due = (self.time >= self.next_refresh).nonzero().flatten()
        if due.numel():
            self._refresh(backend, due, pos[due], quat[due])
            # next refresh one period later; the first after a reset gets a random phase in (0, period]
            first = self.next_refresh[due] == 0.0
            phase = torch.rand(len(due), generator=self.rng, dtype=torch.float64, device=self.device) * self.period
            self.next_refresh[due] = self.time[due] + torch.where(first, self.period - phase, self.period)
        if advance:
            self.time += self.dt
        return self.held

    def _refresh(self, backend, ids: torch.Tensor, pos: torch.Tensor, quat: torch.Tensor) -> None:
        c, n = self.cfg, len(ids)
        rot = quat_wxyz_to_rotmat(quat)  # (n, N, 3, 3)
        vec = torch.einsum("wnij,wnbj->wnbi", rot, self._directions(n))  # world-frame beams
        pnt = pos.unsqueeze(2) + torch.einsum("wnij,bj->wnbi", rot, self.mount_offset)
        dist = backend.ray(pnt.reshape(n, -1, 3), vec.reshape(n, -1, 3), self.body_exclude, ids)
        d = dist.reshape(n, self.N, self.B)
        hit = d >= 0
        self.true_dist[ids] = torch.where(hit, d, math.inf)
        noisy = d + (c.noise_std + c.noise_rel * d.clamp(min=0)) * torch.randn(
            d.shape, generator=self.rng, dtype=torch.float64, device=self.device
        )
        valid = hit & (d <= c.max_range)
        if c.dropout_prob > 0:
            valid &= torch.rand(d.shape, generator=self.rng, dtype=torch.float64, device=self.device) >= c.dropout_prob
        if c.floor_cm:
            noisy = torch.floor(noisy * 100.0) / 100.0
        self.held[ids] = torch.where(valid, noisy.clamp(0.0, c.clip), c.clip)
