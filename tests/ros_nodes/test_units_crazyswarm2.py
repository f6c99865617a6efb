"""cmd_vel_legacy field mapping against Crazyswarm2's server (crazyflie_server.cpp, cmd_vel_legacy_changed):
roll = linear.y, pitch = -linear.x, yawrate = angular.z, thrust = clamp(linear.z, 0, 60000)."""

from robot_rl.deploy.units import cmd_vel_legacy_to_rpyt, rpyt_to_cmd_vel_legacy


def crazyswarm2_server(lin_x, lin_y, ang_z, lin_z):
    """What Crazyswarm2 hands to sendSetpoint(roll, pitch, yawrate, thrust) for a Twist."""
    return lin_y, -lin_x, ang_z, min(max(lin_z, 0.0), 60000.0)


def test_round_trip_is_consistent():
    assert cmd_vel_legacy_to_rpyt(*rpyt_to_cmd_vel_legacy(3.0, -4.0, 10.0, 30000.0)) == (
        3.0,
        -4.0,
        10.0,
        30000.0,
    )


def test_units_match_crazyswarm2_server():
    lx, ly, az, lz = rpyt_to_cmd_vel_legacy(3.0, -4.0, 10.0, 30000.0)
    assert crazyswarm2_server(lx, ly, az, lz) == (3.0, -4.0, 10.0, 30000.0)
