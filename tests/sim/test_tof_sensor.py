"""ToF sensor model (issue 8 acceptance 1): wall distances in the right zones, clip value beyond range, holding."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from sim.backends import make_backend
from sim.scenes.clutter import ClutterConfig, build_model
from sim.sensors.tof import RangeSensors, multiranger, vl53l5cx_row

DT = 0.01
CFG = ClutterConfig(num_drones=2)
WALL_X = CFG.room[0] / 2  # inner surface of the east room wall


@pytest.fixture(scope="module")
def backend():
    b = make_backend("mujoco", build_model(CFG), 2, nthread=1)  # obstacle slots stay parked under the floor
    yield b
    b.close()


def _place(backend, pos0, yaw0: float = 0.0) -> tuple[torch.Tensor, torch.Tensor]:
    """Drone 0 at pos0 with yaw0 in both worlds; drone 1 parked in a far corner."""
    pos = torch.tensor([pos0, [-3.0, 3.0, 1.0]], dtype=torch.float64).expand(2, 2, 3).clone()
    quat = torch.tensor([[math.cos(yaw0 / 2), 0, 0, math.sin(yaw0 / 2)], [1.0, 0, 0, 0]], dtype=torch.float64)
    quat = quat.expand(2, 2, 4).clone()
    for i in range(2):
        backend.qpos[:, 7 * i : 7 * i + 3] = pos[:, i]
        backend.qpos[:, 7 * i + 3 : 7 * i + 7] = quat[:, i]
    backend.forward()
    return pos, quat


def _sensors(backend, seed: int = 0, **kw) -> RangeSensors:
    cfg = vl53l5cx_row(**kw)
    ids = [backend.model.body("cf0").id, backend.model.body("cf1").id]
    return RangeSensors(cfg, 2, ids, DT, torch.Generator().manual_seed(seed))


def _expected_front(dist: float) -> torch.Tensor:
    cfg = vl53l5cx_row()
    ang = torch.deg2rad(torch.tensor(cfg.yaw_deg[:8], dtype=torch.float64))
    return dist / torch.cos(ang)  # wall plane perpendicular to the front axis


def test_wall_in_front_reads_distance_within_noise(backend):
    dist = 1.0  # sensor (2 cm ahead of the centre) to the wall
    pos, quat = _place(backend, [WALL_X - dist - 0.02, 0.0, 1.0])
    s = _sensors(backend, noise_std=0.01, noise_rel=0.01, dropout_prob=0.0)
    readings = []
    for _ in range(40):  # 40 refreshes
        s.reset(torch.arange(2))
        readings.append(s.read(backend, pos, quat).clone())
    r = torch.stack(readings)[:, :, 0]  # (refresh, world, beam) of drone 0
    exp = _expected_front(dist)
    torch.testing.assert_close(s.true_dist[0, 0, :8], exp, atol=1e-9, rtol=0)
    sigma = 0.01 + 0.01 * exp
    front = r[..., :8]
    assert ((front - exp).abs() <= 4 * sigma + 0.01).all()  # +1 cm: readings are floored to centimetres
    assert (front.mean(dim=(0, 1)) - exp + 0.005).abs().max() < 0.01  # unbiased but for the flooring
    # right (-y) and left (+y) walls are 4 m away, the back wall 7 m (beyond range): all read the clip value
    assert (r[..., 8:] == 2.0).all()
    assert math.isinf(float(s.true_dist[0, 0, 16])) or float(s.true_dist[0, 0, 16]) > 4.0


def test_right_sensor_sees_the_wall_after_a_yaw(backend):
    dist = 0.8
    pos, quat = _place(backend, [WALL_X - dist - 0.02, 0.0, 1.0], yaw0=math.pi / 2)  # front now faces +y
    s = _sensors(backend, noise_std=0.0, noise_rel=0.0, floor_cm=False)
    r = s.read(backend, pos, quat)[0, 0]
    torch.testing.assert_close(r[8:16], _expected_front(dist), atol=1e-6, rtol=0)  # right row (sensor 1)
    assert (r[:8] == 2.0).all() and (r[16:] == 2.0).all()


def test_beyond_range_and_dropouts_read_the_clip_value(backend):
    pos, quat = _place(backend, [WALL_X - 1.02, 0.0, 1.0])
    s = _sensors(backend, noise_std=0.0, noise_rel=0.0, max_range=0.9)
    assert (s.read(backend, pos, quat)[:, 0] == 2.0).all()  # the wall at 1 m is beyond a 0.9 m range
    s = _sensors(backend, noise_std=0.0, noise_rel=0.0, dropout_prob=0.3)
    front = []
    for _ in range(50):
        s.reset(torch.arange(2))
        front.append(s.read(backend, pos, quat)[:, 0, :8].clone())
    frac = (torch.stack(front) == 2.0).double().mean()
    assert 0.2 < frac < 0.4


def test_readings_hold_between_refreshes(backend):
    pos, quat = _place(backend, [WALL_X - 1.52, 0.0, 1.0])
    s = _sensors(backend, noise_std=0.0, noise_rel=0.0, floor_cm=False)
    s.reset(torch.arange(2))
    first = s.read(backend, pos, quat).clone()
    refreshes = 0
    prev = first
    for _ in range(100):  # 1 s; the drone creeps toward the wall by 1 mm per control step
        pos[:, 0, 0] += 0.001
        now = s.read(backend, pos, quat).clone()
        changed = ~torch.isclose(now[:, 0, 0], prev[:, 0, 0])
        refreshes += int(changed[0])
        prev = now
    assert 14 <= refreshes <= 16  # 15 Hz at 100 Hz control: held 6 or 7 steps each time
    assert not torch.equal(first, prev)


def test_multiranger_variant(backend):
    pos, quat = _place(backend, [WALL_X - 1.02, 0.0, 1.0])
    cfg = multiranger(noise_std=0.0, noise_rel=0.0, floor_cm=False, clip=4.0)
    ids = [backend.model.body("cf0").id, backend.model.body("cf1").id]
    s = RangeSensors(cfg, 2, ids, DT, torch.Generator().manual_seed(0), sensors_per_drone=5)
    r = s.read(backend, pos, quat)[0, 0]  # front, back, left, right, up
    np.testing.assert_allclose(r[0].item(), 1.0, atol=1e-6)
    np.testing.assert_allclose(r[2:4].numpy(), [3.98, 3.98], atol=1e-6)  # side walls 4 m from the centre
    assert r[1].item() == 4.0  # back wall 7 m away: beyond range -> clip
    assert r[4].item() == 4.0  # no ceiling in the model
