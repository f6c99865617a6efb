"""The ROS 2 package as colcon installs it, and its XML launch files checked as plain data."""

from __future__ import annotations

import importlib
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import yaml

PKG = Path(__file__).resolve().parents[2] / "ros_nodes"
EXEC_MODULES = {
    "policy_node": "robot_rl_ros.policy_node",
    "safety_node": "robot_rl_ros.safety_node",
    "crazyflie_bridge": "robot_rl_ros.crazyflie_bridge",
    "sim_bridge": "robot_rl_ros.sim_bridge",
    "arm_safety_node": "robot_rl_ros.arm_safety_node",
    "arm_sim_bridge": "robot_rl_ros.arm_sim_bridge",
    "leg_safety_node": "robot_rl_ros.leg_safety_node",
    "quadruped_sim_bridge": "robot_rl_ros.quadruped_sim_bridge",
    "swarm_sim_bridge": "robot_rl_ros.swarm_sim_bridge",
    "recorder": "robot_rl_ros.recorder",
}
ALWAYS_DECLARED = {"use_sim_time"}  # rclpy declares it on every node


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """Install the package the way colcon's ament_python build does (setup.py install with setup.cfg)."""
    pytest.importorskip("setuptools")
    tmp = tmp_path_factory.mktemp("colcon")
    prefix, build = tmp / "install", tmp / "build"
    build.mkdir()
    cmd = [
        sys.executable,
        "setup.py",
        "-q",
        "egg_info",
        "--egg-base",
        str(build),
        "build",
        "--build-base",
        str(build),
        "install",
        "--prefix",
        str(prefix),
        "--single-version-externally-managed",
        "--record",
        str(tmp / "rec.txt"),
    ]
    out = subprocess.run(cmd, cwd=PKG, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    return prefix


def launch_nodes():
    for f in sorted((PKG / "launch").glob("*.launch.xml")):
        root = ET.parse(f).getroot()
        assert root.tag == "launch", f"{f.name}: root element is {root.tag}"
        for node in root.iter("node"):
            yield f.name, node


def param_names(node: ET.Element) -> set[str]:
    names = set()
    name = node.get("name")
    for p in node.findall("param"):
        if p.get("name"):
            names.add(p.get("name"))
        elif p.get("from"):
            path = PKG / re.sub(r"^\$\(find-pkg-share robot_rl_ros\)/", "", p.get("from"))
            doc = yaml.safe_load(path.read_text())
            for key, section in doc.items():
                if key.split("/")[-1] == name:
                    names |= set(section["ros__parameters"])
    return names


def test_launch_files_exist():
    names = {f.name for f in (PKG / "launch").glob("*.launch.xml")}
    robots = ("crazyflie", "arm", "quadruped")
    assert {f"{r}.launch.xml" for r in robots} | {
        "sitl.launch.xml",
        "arm_sitl.launch.xml",
        "quadruped_sitl.launch.xml",
        "swarm_sitl.launch.xml",
        "arm_pick_place.launch.xml",
        "arm_pick_place_sitl.launch.xml",
    } <= names


def test_every_executable_is_installed(installed):
    share = installed / "share" / "robot_rl_ros"
    assert (installed / "share/ament_index/resource_index/packages/robot_rl_ros").is_file()
    assert (share / "package.xml").is_file()
    for fname, node in launch_nodes():
        assert node.get("pkg") == "robot_rl_ros", fname
        exe = installed / "lib" / "robot_rl_ros" / node.get("exec")
        assert exe.is_file(), f"{fname}: executable {node.get('exec')} not in lib/robot_rl_ros"
        assert (share / "launch" / fname).is_file()
    configs = {p.name for p in (share / "config").glob("*.yaml")}
    assert configs >= {
        "crazyflie.yaml",
        "sitl.yaml",
        "arm.yaml",
        "arm_sitl.yaml",
        "arm_pick_place.yaml",
        "quadruped.yaml",
        "quadruped_sitl.yaml",
    }


def test_every_launch_parameter_is_declared():
    for fname, node in launch_nodes():
        params = importlib.import_module(EXEC_MODULES[node.get("exec")]).PARAMS
        undeclared = param_names(node) - set(params) - ALWAYS_DECLARED
        assert not undeclared, f"{fname}: node {node.get('name')} does not declare {sorted(undeclared)}"


def test_config_sections_name_existing_nodes():
    nodes = {n.get("name") for _, n in launch_nodes()}
    for f in (PKG / "config").glob("*.yaml"):
        for key in yaml.safe_load(f.read_text()):
            assert key.split("/")[-1] in nodes, f"{f.name}: section {key} matches no launched node"
