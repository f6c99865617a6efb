"""ament_python package: `colcon build` on a robot, `pip install ./ros_nodes` here."""

from glob import glob

from setuptools import setup

PACKAGE = "robot_rl_ros"
EXECUTABLES = {
    "policy_node": "policy_node",
    "safety_node": "safety_node",
    "crazyflie_bridge": "crazyflie_bridge",
    "sim_bridge": "sim_bridge",
    "arm_safety_node": "arm_safety_node",
    "arm_sim_bridge": "arm_sim_bridge",
    "leg_safety_node": "leg_safety_node",
    "quadruped_sim_bridge": "quadruped_sim_bridge",
    "swarm_sim_bridge": "swarm_sim_bridge",
    "recorder": "recorder",
    "deploy_check": "deploy_check",
}
# What robot_rl calls in this package, looked up by name (robot_rl.ros_package): robot_rl never imports it.
ROBOT_RL_FUNCTIONS = {
    "sitl_fly": "sitl:fly",
    "sitl_fly_swarm": "sitl:fly_swarm",
    "sitl_fly_recorded": "sitl:fly_recorded",
    "sitl_reach_recorded": "sitl:reach_recorded",
    "sitl_reach": "sitl:reach",
    "sitl_pick_place": "sitl:pick_place",
    "sitl_pick_place_recorded": "sitl:pick_place_recorded",
    "sitl_walk_recorded": "sitl:walk_recorded",
    "deploy_check": "deploy_check:main",
    "deploy_check_args": "deploy_check:parse_args",
}

setup(
    name=PACKAGE,
    version="0.1.0",
    packages=[PACKAGE],
    data_files=[
        ("share/ament_index/resource_index/packages", [f"resource/{PACKAGE}"]),
        (f"share/{PACKAGE}", ["package.xml"]),
        (f"share/{PACKAGE}/launch", sorted(glob("launch/*.launch.xml"))),
        (f"share/{PACKAGE}/config", sorted(glob("config/*.yaml"))),
    ],
    install_requires=["setuptools"],
    zip_safe=True,
    description="ROS 2 nodes for robot_rl policy bundles",
    license="Apache-2.0",
    entry_points={
        "console_scripts": [f"{exe} = {PACKAGE}.{mod}:main" for exe, mod in EXECUTABLES.items()],
        "robot_rl.ros": [f"{name} = {PACKAGE}.{target}" for name, target in ROBOT_RL_FUNCTIONS.items()],
    },
)
