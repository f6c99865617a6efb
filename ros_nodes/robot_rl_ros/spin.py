"""Start, spin and stop one node the same way for every executable."""

from __future__ import annotations

import sys
from collections.abc import Callable

import rclpy
from rclpy.executors import ExternalShutdownException

from robot_rl.deploy import BundleError


def run_node(node_cls, args: list[str] | None = None) -> int:
    from robot_rl_ros import pubcount

    if pubcount.enabled():
        pubcount.install()
    rclpy.init(args=sys.argv if args is None else args)
    node = None
    try:
        node = node_cls()
        rclpy.spin(node)
    except (BundleError, ValueError) as e:
        # Bad bundle or bad parameter: one line, non-zero exit, no traceback.
        print(f"{node_cls.__name__}: {e}", file=sys.stderr)
        return 2
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
        if node is not None:
            close = getattr(node, "close", None)
            if close:
                close()
            node.destroy_node()
        if pubcount.enabled():
            print(pubcount.report(), flush=True)
        if rclpy.ok():
            rclpy.try_shutdown()
    return 0


def node_main(node_cls) -> Callable[[list[str] | None], int]:
    """The console-script entry point of a node class: main(args) runs it (run_node) and returns the exit code."""

    def main(args: list[str] | None = None) -> int:
        return run_node(node_cls, args)

    main.__doc__ = f"Run {node_cls.__name__} until shut down; the exit code."
    return main
