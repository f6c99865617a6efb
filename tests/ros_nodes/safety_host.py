"""A process that hosts the Crazyflie safety node for the e-stop trials, as a robot runs it: alone.

In the test's own process the node shared the GIL with the harness, the watcher and the polling main
thread; each hand-off of the GIL can wait a switch interval (5 ms), so the measured e-stop latency had
a tail of test threads, not of the node (23.9 ms once against a 6 ms median in CI; here the median is
about 2 ms). Here one DDS
participant lives for the whole test and each trial gets a fresh node in it (the e-stop latches, so
re-arming means a new node). Driven over stdin, one word a line: `start`, `stop`, `quit`; it answers
`started` and `stopped MODE` on stdout.

    python safety_host.py DOMAIN_ID BUNDLE
"""

from __future__ import annotations

import sys
import threading
import time

import rclpy
from rclpy.context import Context
from rclpy.executors import SingleThreadedExecutor
from rclpy.parameter import Parameter
from robot_rl_ros.safety_node import SafetyNode


def main(domain_id: int, bundle: str) -> None:
    ctx = Context()
    rclpy.init(context=ctx, domain_id=domain_id)
    ex = SingleThreadedExecutor(context=ctx)
    node, spinning, thread = None, threading.Event(), None

    def spin() -> None:
        while spinning.is_set():
            ex.spin_once(timeout_sec=0.005)

    for line in sys.stdin:
        word = line.strip()
        if word == "start" and node is None:
            node = SafetyNode(context=ctx, namespace="/cf1", parameter_overrides=[Parameter("bundle", value=bundle)])
            ex.add_node(node)
            spinning.set()
            thread = threading.Thread(target=spin, daemon=True)
            thread.start()
            # Answer once the node's command writer has matched the test's two readers (harness, watcher):
            # a reliable writer still matching can block a publish for hundreds of ms in Fast DDS.
            end = time.monotonic() + 30.0
            while node.cmd_pub.get_subscription_count() < 2 and time.monotonic() < end:
                time.sleep(0.01)
            print("started", flush=True)
        elif word == "stop" and node is not None:
            spinning.clear()
            thread.join(2.0)
            mode = node.sup.mode.name
            ex.remove_node(node)
            node.destroy_node()
            node = None
            print(f"stopped {mode}", flush=True)
        elif word == "quit":
            break
    spinning.clear()
    if thread is not None:
        thread.join(2.0)
    ex.shutdown()
    ctx.try_shutdown()


if __name__ == "__main__":
    main(int(sys.argv[1]), sys.argv[2])
