"""A Crazyflie firmware stand-in at the radio boundary: CRTP over cflib's UDP link.

cflib's UDP driver (cflib/crtp/udpdriver.py) sends one CRTP packet per datagram: byte 0 is the
header (port << 4 | link bits | channel), the rest is the payload (at most 30 bytes). This endpoint
answers what cflib's connection setup asks for (link-service magic and protocol version, log TOC,
memory count, param TOC and values), runs log blocks at their period from a fixed simulated state,
and decodes every control packet into a typed event, checking units and ranges as it decodes.

Packet layouts follow cflib 0.1.34 (commander.py, high_level_commander.py, supervisor.py,
localization.py, log.py, param.py, toc.py, mem/__init__.py, platformservice.py). Problems found
while decoding go to `errors` (the endpoint thread must not die on them); tests call
`assert_clean()`.
"""

from __future__ import annotations

import errno
import math
import select
import socket
import struct
import threading
import time
import zlib
from dataclasses import dataclass

PORT_PARAM, PORT_COMMANDER, PORT_MEM, PORT_LOG, PORT_LOC = 2, 3, 4, 5, 6
PORT_GENERIC, PORT_HL, PORT_SUPERVISOR, PORT_PLATFORM, PORT_LINK = 7, 8, 9, 13, 15

THRUST_MAX = 60000  # cmd_vel_legacy / send_setpoint thrust ceiling (Crazyswarm2 clamps there)
MAX_ANGLE_DEG = 90.0  # a roll/pitch setpoint beyond this is not an attitude in degrees
MAX_YAW_RATE_DEG_S = 2000.0  # the gyro's range; beyond it a yaw rate is not in deg/s
LOG_MAX_BYTES = 26  # log payload per block (30 minus block id and 3-byte timestamp)

# Log variable types as cflib's LogTocElement numbers them: id -> struct format.
LOG_TYPES = {1: "<B", 2: "<H", 3: "<I", 4: "<b", 5: "<h", 6: "<i", 7: "<f", 8: "<e"}
LOG_FLOAT = 7
# Param types as ParamTocElement numbers them (low nibble); 0x40 marks read-only.
PARAM_TYPES = {0x08: "<B", 0x06: "<f"}
PARAM_RO = 0x40

# The simulated Crazyflie: what the firmware logs, in its units (m, m/s, unit quaternion, gyro deg/s).
# Values are exact in float32 and (for the gyro) in FP16, so a test can compare for equality.
DEFAULT_STATE = {
    "stateEstimate.x": 0.5,
    "stateEstimate.y": -0.25,
    "stateEstimate.z": 1.0,
    "stateEstimate.vx": 0.125,
    "stateEstimate.vy": -0.5,
    "stateEstimate.vz": 0.0625,
    "stateEstimate.qx": 0.0,
    "stateEstimate.qy": 0.0,
    "stateEstimate.qz": 0.6,
    "stateEstimate.qw": 0.8,
    "gyro.x": 12.5,
    "gyro.y": -30.0,
    "gyro.z": 90.0,
    "pm.vbat": 3.9,
}
LOG_TOC = [(name, LOG_FLOAT) for name in DEFAULT_STATE]  # the firmware stores all of these as float
PARAM_TOC = [
    ("commander.enHighLevel", 0x08, 1),
    ("stabilizer.estimator", 0x08, 2),
    ("stabilizer.controller", 0x08, 1),
    ("pm.lowVoltage", 0x06 | PARAM_RO, 3.2),
]


@dataclass(frozen=True)
class Packet:
    t: float  # time.monotonic() at receipt
    port: int
    channel: int
    data: bytes


@dataclass(frozen=True)
class Setpoint:
    """Legacy rpyt setpoint as on the wire: deg, deg, deg/s, PWM. cflib's send_setpoint puts -pitch here."""

    t: float
    roll: float
    pitch: float
    yawrate: float
    thrust: int


@dataclass(frozen=True)
class NotifyStop:
    t: float
    remain_valid_ms: int


@dataclass(frozen=True)
class Land:
    t: float
    height: float
    yaw: float
    use_current_yaw: bool
    duration: float
    group_mask: int


@dataclass(frozen=True)
class EmergencyStop:
    t: float
    via: str  # "supervisor" (protocol >= 12) or "localization" (older firmware)


def _toc_entry(name: str, kind: int) -> bytes:
    group, var = name.split(".")
    return bytes([kind]) + group.encode() + b"\0" + var.encode() + b"\0"


def _toc_crc(entries: list[bytes]) -> int:
    return zlib.crc32(b"".join(entries)) & 0xFFFFFFFF


class CrtpEndpoint:
    """A UDP socket on 127.0.0.1 (OS-chosen port) that speaks CRTP like Crazyflie firmware."""

    def __init__(self, protocol_version: int = 12):
        assert protocol_version >= 4, "only TOC/log protocol v2 (firmware of the last years) is emulated"
        self.protocol_version = protocol_version
        self.state = dict(DEFAULT_STATE)
        self.params = {name: value for name, _, value in PARAM_TOC}
        self.packets: list[Packet] = []
        self.events: list = []  # Setpoint | NotifyStop | Land | EmergencyStop, in arrival order
        self.errors: list[str] = []
        self.log_packets_sent: dict[int, int] = {}
        self.thrust_locked = True
        self._log_toc = [_toc_entry(n, k) for n, k in LOG_TOC]
        self._param_toc = [_toc_entry(n, k) for n, k, _ in PARAM_TOC]
        self._blocks: dict[int, dict] = {}  # id -> {"vars": [(toc index, fetch type)], "period": s | None}
        self._client = None
        self._t0 = time.monotonic()
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self._sock.bind(("127.0.0.1", 0))
        self.uri = f"udp://127.0.0.1:{self._sock.getsockname()[1]}"
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="crtp-endpoint", daemon=True)
        self._thread.start()

    # ---- test helpers -------------------------------------------------------------------------
    def of(self, kind: type, since: float = -math.inf) -> list:
        return [e for e in list(self.events) if isinstance(e, kind) and e.t >= since]

    def wait_for(self, cond, timeout: float) -> bool:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if cond():
                return True
            time.sleep(0.005)
        return bool(cond())

    def assert_clean(self) -> None:
        assert not self.errors, "the endpoint's decoder rejected packets:\n" + "\n".join(self.errors[:20])

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5.0)
        self._sock.close()

    # ---- loop -----------------------------------------------------------------------------------
    def _run(self) -> None:
        while not self._stop.is_set():
            now = time.monotonic()
            due = [b["next"] - now for b in self._blocks.values() if b["period"]]
            ready, _, _ = select.select([self._sock], [], [], max(0.0, min([0.05, *due])))
            if ready:
                try:
                    data, addr = self._sock.recvfrom(64)
                except OSError:
                    continue
                if data:
                    self._client = addr  # log data goes to whoever spoke last (a reconnect gets a new port)
                    try:
                        self._receive(time.monotonic(), data, addr)
                    except Exception as e:  # a malformed packet must show up in the test, not kill the thread
                        self.errors.append(f"cannot decode {data.hex()}: {e!r}")
            self._stream_logs(time.monotonic())

    def _check(self, ok: bool, t: float, msg: str) -> bool:
        if not ok:
            self.errors.append(f"t={t - self._t0:.3f}s: {msg}")
        return ok

    def _reply(self, addr, port: int, channel: int, payload: bytes) -> None:
        try:
            self._sock.sendto(bytes([(port << 4) | 0x0C | channel]) + payload, addr)
        except OSError:
            pass  # the client went away; UDP has no link to tear down

    def _receive(self, t: float, data: bytes, addr) -> None:
        port, channel, payload = data[0] >> 4, data[0] & 0x03, bytes(data[1:])
        self.packets.append(Packet(t, port, channel, payload))
        handler = {
            PORT_LINK: self._on_link,
            PORT_PLATFORM: self._on_platform,
            PORT_LOG: self._on_log,
            PORT_MEM: self._on_mem,
            PORT_PARAM: self._on_param,
            PORT_COMMANDER: self._on_commander,
            PORT_GENERIC: self._on_generic,
            PORT_HL: self._on_high_level,
            PORT_SUPERVISOR: self._on_supervisor,
            PORT_LOC: self._on_localization,
        }.get(port)
        if self._check(handler is not None, t, f"packet on port {port} the robot_rl link never uses"):
            handler(t, channel, payload, addr)

    # ---- connection setup -------------------------------------------------------------------
    def _on_link(self, t, channel, payload, addr) -> None:
        if channel == 0:  # echo: cflib's link statistics pings 10x per second
            self._reply(addr, PORT_LINK, 0, payload)
        elif channel == 1:  # source: the magic string tells cflib to ask for the protocol version
            self._reply(addr, PORT_LINK, 1, b"Bitcraze Crazyflie")
        elif channel == 3:  # null packet (a UDP scan probe): answer so the client sees a live link
            self._sock.sendto(b"\xff", addr)

    def _on_platform(self, t, channel, payload, addr) -> None:
        if channel == 1 and payload[:1] == b"\x00":
            self._reply(addr, PORT_PLATFORM, 1, bytes([0, self.protocol_version]))
        elif channel == 1 and payload[:1] == b"\x01":
            self._reply(addr, PORT_PLATFORM, 1, b"\x01" + b"2025.02 (robot_rl endpoint)")

    def _on_toc(self, t, port, payload, addr, entries: list[bytes], info_extra: bytes) -> None:
        cmd = payload[0]
        if cmd == 3:  # TOC info v2: count, CRC (cflib's cache key)
            self._reply(addr, port, 0, bytes([3]) + struct.pack("<HI", len(entries), _toc_crc(entries)) + info_extra)
        elif cmd == 2:  # TOC item v2
            (ident,) = struct.unpack("<H", payload[1:3])
            if self._check(ident < len(entries), t, f"port {port}: TOC item {ident} does not exist"):
                self._reply(addr, port, 0, payload[:3] + entries[ident])
        else:
            self._check(False, t, f"port {port}: TOC command {cmd} (v1) though protocol {self.protocol_version}")

    def _on_mem(self, t, channel, payload, addr) -> None:
        if channel == 0 and payload[:1] == b"\x01":  # number of memories: none (no decks, no EEPROM)
            self._reply(addr, PORT_MEM, 0, b"\x01\x00")
        else:
            self._check(False, t, f"memory request {payload.hex()} though no memory was announced")

    def _on_param(self, t, channel, payload, addr) -> None:
        if channel == 0:
            return self._on_toc(t, PORT_PARAM, payload, addr, self._param_toc, b"")
        (ident,) = struct.unpack("<H", payload[:2])
        if not self._check(ident < len(PARAM_TOC), t, f"param id {ident} does not exist"):
            return
        name, kind, _ = PARAM_TOC[ident]
        fmt = PARAM_TYPES[kind & 0x0F]
        if channel == 1:  # read v2: id, status 0, value
            self._reply(addr, PORT_PARAM, 1, payload[:2] + b"\x00" + struct.pack(fmt, self.params[name]))
        elif channel == 2 and self._check(not kind & PARAM_RO, t, f"write to read-only param {name}"):
            (self.params[name],) = struct.unpack(fmt, payload[2:])
            self._reply(addr, PORT_PARAM, 2, payload)  # the firmware echoes the new value

    # ---- log blocks -------------------------------------------------------------------------------
    def _on_log(self, t, channel, payload, addr) -> None:
        if channel == 0:
            return self._on_toc(t, PORT_LOG, payload, addr, self._log_toc, bytes([16, 128]))
        if not self._check(channel == 1, t, f"log packet on channel {channel}"):
            return
        cmd, block_id = payload[0], payload[1] if len(payload) > 1 else 0
        status = 0
        if cmd == 5:  # reset: cflib sends it before the TOC download
            self._blocks.clear()
        elif cmd in (6, 7):  # create / append v2: (fetch-as | stored-as << 4, id lo, id hi) per variable
            status = self._define_block(t, cmd == 6, block_id, payload[2:])
        elif cmd == 3:  # start, period in 10 ms units
            period = payload[2]
            self._check(period >= 1, t, f"log block {block_id} started with period {period}")
            status = errno.ENOENT if block_id not in self._blocks else 0
            if not status:
                self._blocks[block_id].update(period=period * 0.01, next=t)
        elif cmd in (4, 2):  # stop / delete
            status = errno.ENOENT if block_id not in self._blocks else 0
            if not status and cmd == 4:
                self._blocks[block_id]["period"] = None
            elif not status:
                del self._blocks[block_id]
        else:
            self._check(False, t, f"log command {cmd} (v1) though protocol {self.protocol_version}")
            return
        self._reply(addr, PORT_LOG, 1, bytes([cmd, block_id, status]))

    def _define_block(self, t, create: bool, block_id: int, ops: bytes) -> int:
        if create and block_id in self._blocks:
            return errno.EEXIST
        if not create and block_id not in self._blocks:
            return errno.ENOENT
        variables = [] if create else list(self._blocks[block_id]["vars"])
        for i in range(0, len(ops), 3):
            fetch = ops[i] & 0x0F  # the firmware reads TOC variables as the TOC says and converts
            (ident,) = struct.unpack("<H", ops[i + 1 : i + 3])
            if not self._check(fetch in LOG_TYPES and ident < len(LOG_TOC), t, f"bad log op {ops[i : i + 3].hex()}"):
                return errno.ENOENT
            variables.append((ident, fetch))
        if sum(struct.calcsize(LOG_TYPES[f]) for _, f in variables) > LOG_MAX_BYTES:
            return errno.E2BIG
        self._blocks[block_id] = {"vars": variables, "period": None, "next": 0.0}
        return 0

    def _stream_logs(self, now: float) -> None:
        for block_id, b in list(self._blocks.items()):
            if not b["period"] or now < b["next"] or self._client is None:
                continue
            stamp = int((now - self._t0) * 1000) & 0xFFFFFF  # firmware ticks (ms), 3 bytes
            body = b"".join(self._log_value(i, f) for i, f in b["vars"])
            self._reply(self._client, PORT_LOG, 2, bytes([block_id]) + stamp.to_bytes(3, "little") + body)
            self.log_packets_sent[block_id] = self.log_packets_sent.get(block_id, 0) + 1
            b["next"] += b["period"]
            if b["next"] < now:  # fell behind (loaded machine): skip rather than burst
                b["next"] = now + b["period"]

    def _log_value(self, ident: int, fetch: int) -> bytes:
        value = self.state[LOG_TOC[ident][0]]
        fmt = LOG_TYPES[fetch]
        return struct.pack(fmt, value if fmt in ("<f", "<e") else int(round(value)))

    # ---- control packets ---------------------------------------------------------------------
    def _on_commander(self, t, channel, payload, addr) -> None:
        if not self._check(channel == 0 and len(payload) == 14, t, f"commander packet {payload.hex()}"):
            return
        roll, pitch, yawrate, thrust = struct.unpack("<fffH", payload)
        self._check(all(map(math.isfinite, (roll, pitch, yawrate))), t, f"non-finite setpoint {payload.hex()}")
        self._check(abs(roll) <= MAX_ANGLE_DEG and abs(pitch) <= MAX_ANGLE_DEG, t, f"tilt {roll}, {pitch} not deg")
        self._check(abs(yawrate) <= MAX_YAW_RATE_DEG_S, t, f"yaw rate {yawrate} not in deg/s")
        self._check(thrust <= THRUST_MAX, t, f"thrust {thrust} above {THRUST_MAX}")
        # The firmware's thrust lock: motors stay off until a zero-thrust setpoint arrives.
        self._check(thrust == 0 or not self.thrust_locked, t, f"thrust {thrust} before a zero-thrust unlock")
        if thrust == 0:
            self.thrust_locked = False
        self.events.append(Setpoint(t, roll, pitch, yawrate, thrust))

    def _on_generic(self, t, channel, payload, addr) -> None:
        if self._check(channel == 1 and payload[:1] == b"\x00" and len(payload) == 5, t, f"generic {payload.hex()}"):
            self.events.append(NotifyStop(t, struct.unpack("<I", payload[1:])[0]))
            # Stricter than some firmware versions: after a hand-back a new low-level stream must
            # unlock again, which is what our streamer promises.
            self.thrust_locked = True

    def _on_high_level(self, t, channel, payload, addr) -> None:
        if not self._check(payload[:1] == b"\x08" and len(payload) == 15, t, f"high-level cmd {payload.hex()}"):
            return  # only land (COMMAND_LAND_2) is expected from robot_rl
        _, group_mask, height, yaw, use_current_yaw, duration = struct.unpack("<BBff?f", payload)
        self._check(math.isfinite(height) and 0.0 <= height <= 3.0, t, f"land height {height} m")
        self._check(math.isfinite(yaw) and abs(yaw) <= 2 * math.pi, t, f"land yaw {yaw} not in rad")
        self._check(math.isfinite(duration) and 0.1 <= duration <= 20.0, t, f"land duration {duration} s")
        self.events.append(Land(t, height, yaw, use_current_yaw, duration, group_mask))

    def _on_supervisor(self, t, channel, payload, addr) -> None:
        self._check(self.protocol_version >= 12, t, "supervisor port used though the firmware predates it")
        if channel == 0 and payload[:1] == b"\x0c":  # state bitfield: can be armed, is armed
            self._reply(addr, PORT_SUPERVISOR, 0, b"\x8c" + struct.pack("<H", 0b11))
        elif self._check(channel == 1 and payload == b"\x03", t, f"supervisor command {payload.hex()}"):
            self.events.append(EmergencyStop(t, "supervisor"))

    def _on_localization(self, t, channel, payload, addr) -> None:
        if self._check(channel == 1 and payload == b"\x03", t, f"localization packet {payload.hex()}"):
            self.events.append(EmergencyStop(t, "localization"))
