"""Recorder: every topic of the graph into one MCAP file (rosbag2's storage format, Foxglove reads it).

Messages are recorded as the serialized CDR bytes DDS delivered (no decode/re-encode), with
'ros2msg' schemas and rosbag2's channel metadata, so `ros2 bag info`, Foxglove and the `mcap`
readers open the file. New topics are found by polling the graph; each is subscribed with the QoS
its publishers offer (reliable only if all are, transient-local only if all are, as rosbag2 does).
"""

from __future__ import annotations

import importlib
import sys
import threading
import time
from pathlib import Path

from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy

from robot_rl_ros.msgdefs import full_definition
from robot_rl_ros.params import declare
from robot_rl_ros.spin import node_main

PARAMS = {
    "output": "",  # .mcap path; empty: recording_<unix time>.mcap in the working directory
    "topics": [""],  # only these (absolute names); [""]: every topic
    "exclude": [""],  # absolute names never recorded
    "discovery_period_s": 0.05,
    "depth": 200,
}


def message_class(type_name: str):
    """'nav_msgs/msg/Odometry' -> the Python message class."""
    pkg, kind, name = type_name.split("/")
    return getattr(importlib.import_module(f"{pkg}.{kind}"), name)


def adapted_qos(infos, depth: int) -> QoSProfile:
    reliable = bool(infos) and all(i.qos_profile.reliability == ReliabilityPolicy.RELIABLE for i in infos)
    latched = bool(infos) and all(i.qos_profile.durability == DurabilityPolicy.TRANSIENT_LOCAL for i in infos)
    return QoSProfile(
        history=HistoryPolicy.KEEP_LAST,
        depth=depth,
        reliability=ReliabilityPolicy.RELIABLE if reliable else ReliabilityPolicy.BEST_EFFORT,
        durability=DurabilityPolicy.TRANSIENT_LOCAL if latched else DurabilityPolicy.VOLATILE,
    )


def _qos_yaml(q: QoSProfile) -> str:
    """rosbag2's offered_qos_profiles metadata (one profile)."""
    return (
        f"- history: keep_last\n  depth: {q.depth}\n  reliability: {q.reliability.name.lower()}\n"
        f"  durability: {q.durability.name.lower()}\n"
    )


class McapSink:
    """Thread-safe MCAP writer of raw CDR messages."""

    def __init__(self, path: str):
        from mcap.writer import CompressionType, Writer

        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._f = open(self.path, "wb")  # noqa: SIM115 (closed in close())
        self._w = Writer(self._f, compression=CompressionType.ZSTD)
        self._w.start(profile="ros2", library="robot_rl_ros.recorder")
        self._lock = threading.Lock()
        self._schemas: dict[str, int] = {}
        self.counts: dict[str, int] = {}
        self._seq: dict[int, int] = {}
        self.closed = False

    def add_channel(self, topic: str, type_name: str, qos: QoSProfile) -> int:
        with self._lock:
            if type_name not in self._schemas:
                self._schemas[type_name] = self._w.register_schema(
                    name=type_name, encoding="ros2msg", data=full_definition(type_name).encode()
                )
            self.counts[topic] = 0
            return self._w.register_channel(
                topic=topic,
                message_encoding="cdr",
                schema_id=self._schemas[type_name],
                metadata={"offered_qos_profiles": _qos_yaml(qos)},
            )

    def write(self, channel_id: int, topic: str, data: bytes, log_ns: int, publish_ns: int) -> None:
        with self._lock:
            if self.closed:
                return
            seq = self._seq.get(channel_id, 0)
            self._seq[channel_id] = seq + 1
            self._w.add_message(channel_id, log_time=log_ns, data=data, publish_time=publish_ns, sequence=seq)
            self.counts[topic] += 1

    def close(self) -> None:
        with self._lock:
            if not self.closed:
                self.closed = True
                self._w.finish()
                self._f.close()


class Recorder(Node):
    def __init__(self, **kwargs):
        super().__init__("recorder", **kwargs)
        p = declare(self, PARAMS)
        self.only = {t for t in p["topics"] if t}
        self.exclude = {t for t in p["exclude"] if t}
        self.depth = int(p["depth"])
        out = p["output"] or f"recording_{int(time.time())}.mcap"
        self.sink = McapSink(out)
        self.subs: dict[str, object] = {}
        self.create_timer(p["discovery_period_s"], self._discover)
        self._discover()
        self.get_logger().info(f"recording {'all topics' if not self.only else sorted(self.only)} to {out}")

    def _discover(self) -> None:
        for topic, types in self.get_topic_names_and_types():
            if topic in self.subs or topic in self.exclude or (self.only and topic not in self.only):
                continue
            infos = self.get_publishers_info_by_topic(topic)
            if not infos:
                continue  # only subscribers so far: the QoS to offer is not known yet
            type_name = types[0]
            try:
                cls = message_class(type_name)
                q = adapted_qos(infos, self.depth)
                channel = self.sink.add_channel(topic, type_name, q)
            except (ImportError, AttributeError, FileNotFoundError) as e:
                self.get_logger().error(f"cannot record {topic} ({type_name}): {e}")
                self.subs[topic] = None
                continue
            self.subs[topic] = self.create_subscription(cls, topic, self._make_cb(channel, topic), q, raw=True)
            self.get_logger().info(f"+ {topic} ({type_name}, {q.reliability.name.lower()})")

    def _make_cb(self, channel: int, topic: str):
        def cb(data: bytes, info) -> None:
            received = self.get_clock().now().nanoseconds
            self.sink.write(channel, topic, data, received, int(info.get("source_timestamp", received)))

        return cb

    def close(self) -> None:
        self.sink.close()
        self.get_logger().info(f"recorded {self.sink.counts} to {self.sink.path}")
        print(f"recorded {self.sink.counts}", flush=True)


main = node_main(Recorder)  # the console script


if __name__ == "__main__":
    sys.exit(main())
