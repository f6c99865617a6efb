"""Declared parameters: each node lists its parameters with defaults in one dict, which the
launch-file test reads to prove every parameter a launch file sets is declared."""

from __future__ import annotations

from rclpy.node import Node


def declare(node: Node, defaults: dict) -> dict:
    """Declare every parameter (typed by its default) and return the values in effect."""
    for name, default in defaults.items():
        node.declare_parameter(name, default)
    return {name: node.get_parameter(name).value for name in defaults}


# On simulated time a node's clock is the last /clock sample it has processed; a node the machine
# starves reads the states of later steps before their /clock samples (both come from the bridge at
# the same instant, on different topics). Stamps up to this far ahead are that lag, not a glitch.
SIM_CLOCK_LAG_S = 1.0


def max_future_s(node: Node, configured_s: float) -> float:
    """How far ahead of the node's clock a stamp may be: the configured skew on wall time, at least
    SIM_CLOCK_LAG_S on simulated time."""
    if node.get_parameter("use_sim_time").value:
        return max(float(configured_s), SIM_CLOCK_LAG_S)
    return float(configured_s)
