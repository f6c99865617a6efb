"""Declared parameters: each node lists its parameters with defaults in one dict, which the
launch-file test reads to prove every parameter a launch file sets is declared."""

from __future__ import annotations

from rclpy.node import Node


def declare(node: Node, defaults: dict) -> dict:
    """Declare every parameter (typed by its default) and return the values in effect."""
    for name, default in defaults.items():
        node.declare_parameter(name, default)
    return {name: node.get_parameter(name).value for name in defaults}
