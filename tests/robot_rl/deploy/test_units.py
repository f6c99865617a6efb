import numpy as np
import pytest

from robot_rl.deploy import units


def test_quaternion_order_round_trip():
    rng = np.random.default_rng(0)
    q = rng.normal(size=(100, 4))
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    assert np.allclose(units.quat_xyzw_to_wxyz(units.quat_wxyz_to_xyzw(q)), q)
    assert np.allclose(units.quat_wxyz_to_xyzw([1.0, 0.0, 0.0, 0.0]), [0.0, 0.0, 0.0, 1.0])


def test_euler_round_trip_and_rotation_matrix():
    rng = np.random.default_rng(1)
    rpy = np.stack([rng.uniform(-3, 3, 200), rng.uniform(-1.5, 1.5, 200), rng.uniform(-3, 3, 200)], axis=1)
    q = units.euler_rpy_to_quat_wxyz(rpy[:, 0], rpy[:, 1], rpy[:, 2])
    assert np.allclose(units.quat_wxyz_to_euler_rpy(q), rpy, atol=1e-9)
    r = units.quat_wxyz_to_rotmat(q)
    assert np.allclose(r @ np.swapaxes(r, -1, -2), np.eye(3), atol=1e-12)
    # 90 degrees of yaw takes body x to world y
    rz = units.quat_wxyz_to_rotmat(units.euler_rpy_to_quat_wxyz(0.0, 0.0, np.pi / 2))
    assert np.allclose(rz @ [1, 0, 0], [0, 1, 0], atol=1e-12)


def test_degrees_radians_round_trip():
    x = np.linspace(-720, 720, 50)
    assert np.allclose(units.rad2deg(units.deg2rad(x)), x)


def test_pwm_thrust_round_trip_and_published_values():
    pwm = np.linspace(1000, 65535, 100)
    assert np.allclose(units.thrust_n_to_pwm(units.pwm_to_thrust_n(pwm)), pwm)
    # about 0.15 N per motor at full PWM (stock motors, 27 g drone: T/W about 2.2)
    assert units.pwm_to_thrust_n(65535) == pytest.approx(0.148, abs=0.002)
    hover = units.thrust_n_to_pwm(0.027 * 9.81 / 4)
    assert 36000 < hover < 41000


def test_cmd_vel_legacy_round_trip_and_units():
    lx, ly, az, lz = units.rpyt_to_cmd_vel_legacy(5.0, 10.0, -30.0, 70000.0)
    assert (lx, ly, az) == (-10.0, 5.0, -30.0)  # the server reads roll = linear.y, pitch = -linear.x
    assert lz == units.SETPOINT_THRUST_MAX  # thrust clipped to the 0..60000 the server accepts
    back = units.cmd_vel_legacy_to_rpyt(lx, ly, az, 41000.0)
    assert back == (5.0, 10.0, -30.0, 41000.0)
