"""robot_rl reaches the ROS 2 package through entry points (robot_rl.ros_package), never by importing it."""

from importlib.metadata import PackageNotFoundError, distribution

import pytest

from robot_rl import cli, ros_package, sitl_flight
from robot_rl.config import ConfigError
from robot_rl.ros_package import GROUP, RosPackageMissing, ros_function


def _ros_installed() -> bool:
    try:
        distribution("robot_rl_ros")
    except PackageNotFoundError:
        return False
    return True


needs_ros_package = pytest.mark.skipif(not _ros_installed(), reason="robot_rl_ros is not installed")


@pytest.fixture
def no_ros_package(monkeypatch):
    """As on a machine without robot_rl_ros: no distribution registers the group."""
    monkeypatch.setattr(ros_package, "entry_points", lambda group, name: ())


@needs_ros_package
@pytest.mark.parametrize(
    "name, module, function",
    [
        ("sitl_fly", "robot_rl_ros.sitl", "fly"),
        ("sitl_fly_swarm", "robot_rl_ros.sitl", "fly_swarm"),
        ("deploy_check", "robot_rl_ros.deploy_check", "main"),
        ("deploy_check_args", "robot_rl_ros.deploy_check", "parse_args"),
    ],
)
def test_the_lookup_finds_the_functions_the_ros_package_registers(name, module, function):
    import importlib

    assert ros_function(name) is getattr(importlib.import_module(module), function)


def test_a_group_no_package_registers_is_a_clear_import_error():
    with pytest.raises(RosPackageMissing, match="robot_rl_ros is not installed") as e:
        ros_function("sitl_fly", group="robot_rl.no_such_group")
    assert isinstance(e.value, ImportError)  # callers that fall back on ImportError keep doing so
    assert "'sitl_fly'" in str(e.value) and "'robot_rl.no_such_group'" in str(e.value)


@needs_ros_package
def test_a_name_the_package_does_not_register_is_the_same_error():
    with pytest.raises(RosPackageMissing, match="no entry point 'no_such_function' in group 'robot_rl.ros'"):
        ros_function("no_such_function")
    assert GROUP == "robot_rl.ros"


def test_deploy_check_without_the_ros_package_is_one_line(no_ros_package, capsys):
    assert cli.main(["deploy", "check", "some_bundle"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "deploy check needs the ROS 2 package" in err[0], err
    assert "robot_rl_ros is not installed" in err[0]


def test_a_swarm_flight_without_the_ros_package_is_a_config_error(no_ros_package, tmp_path):
    with pytest.raises(ConfigError, match="not importable: robot_rl_ros is not installed"):
        sitl_flight._fly_swarm_sitl(tmp_path, 3, 1.0, None)
