"""The Crazyflie over cflib: log blocks in, streamed legacy setpoints out.

cflib is imported lazily (only a robot's computer needs it). `CflibLink` is the single place that
touches cflib objects, so tests can stand in a fake link object at exactly this boundary.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import numpy as np

from robot_conventions.units import SETPOINT_THRUST_MAX

# Log blocks hold at most 26 bytes: position + velocity as 6 floats, attitude as 4 floats + 3 half floats.
LOG_PV = [
    ("stateEstimate.x", "float"),
    ("stateEstimate.y", "float"),
    ("stateEstimate.z", "float"),
    ("stateEstimate.vx", "float"),
    ("stateEstimate.vy", "float"),
    ("stateEstimate.vz", "float"),
]
LOG_ATT = [
    ("stateEstimate.qx", "float"),
    ("stateEstimate.qy", "float"),
    ("stateEstimate.qz", "float"),
    ("stateEstimate.qw", "float"),
    ("gyro.x", "FP16"),
    ("gyro.y", "FP16"),
    ("gyro.z", "FP16"),
]


class SetpointStreamer:
    """Sends rpyt setpoints the way the firmware needs them.

    - one zero-thrust setpoint before any other (the firmware's thrust lock);
    - thrust as an integer PWM within 0..60000; a non-finite command is never sent;
    - when commands stop arriving, the streamer does not repeat stale ones: it hands control
      back to the on-board high-level commander (notify_setpoint_stop) and asks it to land.
    """

    def __init__(
        self,
        cf,
        command_loss_s: float = 0.3,
        land_on_loss: bool = True,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.cf = cf
        self.command_loss_s = command_loss_s
        self.land_on_loss = land_on_loss
        self.clock = clock
        self.unlocked = False
        self.handed_back = False
        self.last_send: float | None = None
        self.sent = 0
        self.lock = threading.Lock()

    def send(self, rpyt) -> bool:
        rpyt = np.asarray(rpyt, dtype=np.float64)
        if rpyt.shape != (4,) or not np.all(np.isfinite(rpyt)):
            return False
        with self.lock:
            if not self.unlocked:
                self.cf.commander.send_setpoint(0.0, 0.0, 0.0, 0)
                self.unlocked = True
            thrust = int(round(float(np.clip(rpyt[3], 0.0, SETPOINT_THRUST_MAX))))
            self.cf.commander.send_setpoint(float(rpyt[0]), float(rpyt[1]), float(rpyt[2]), thrust)
            self.last_send = self.clock()
            self.handed_back = False
            self.sent += 1
        return True

    def check(self) -> bool:
        """Call at >= 10 Hz. Returns True when it handed control back because commands stopped."""
        with self.lock:
            if self.handed_back or self.last_send is None or self.clock() - self.last_send < self.command_loss_s:
                return False
            self._hand_back(land=self.land_on_loss)
            return True

    def _hand_back(self, land: bool) -> None:
        self.cf.commander.send_notify_setpoint_stop()
        if land:
            self.cf.high_level_commander.land(0.0, 2.0, yaw=None)  # yaw=None: land at the current heading
        self.handed_back = True
        self.unlocked = False  # a later low-level stream must unlock again

    def emergency_stop(self) -> None:
        sup = getattr(self.cf, "supervisor", None)
        if sup is not None and hasattr(sup, "send_emergency_stop"):
            sup.send_emergency_stop()
        else:
            self.cf.loc.send_emergency_stop()

    def release(self) -> None:
        """Before handing the Crazyflie back (shutdown): stop the low-level stream politely."""
        with self.lock:
            if not self.handed_back and self.last_send is not None:
                self._hand_back(land=False)


class CflibLink:
    """Opens a cflib link and delivers merged state samples to `on_state(raw_dict)`."""

    def __init__(self, uri: str, on_state: Callable[[dict], None], period_ms: int = 10):
        import cflib.crtp
        from cflib.crazyflie import Crazyflie

        cflib.crtp.init_drivers()
        self.uri = uri
        self.on_state = on_state
        self.period_ms = period_ms
        self.cf = Crazyflie(rw_cache=None)
        self._att: dict | None = None  # no state goes out before the first attitude block: never a made-up attitude
        self._connected = threading.Event()
        self.cf.fully_connected.add_callback(lambda _uri: self._connected.set())

    def open(self, timeout_s: float = 10.0) -> None:
        from cflib.crazyflie.log import LogConfig

        self.cf.open_link(self.uri)
        if not self._connected.wait(timeout_s):
            raise ConnectionError(f"no Crazyflie at {self.uri} within {timeout_s:.0f} s")
        for name, variables, cb in (("rrl_pv", LOG_PV, self._on_pv), ("rrl_att", LOG_ATT, self._on_att)):
            lc = LogConfig(name=name, period_in_ms=self.period_ms)
            for var, kind in variables:
                lc.add_variable(var, kind)
            self.cf.log.add_config(lc)
            lc.data_received_cb.add_callback(cb)
            lc.start()

    def _on_att(self, timestamp, data, logconf) -> None:
        self._att = {
            "quaternion": np.array(
                [
                    data["stateEstimate.qx"],
                    data["stateEstimate.qy"],
                    data["stateEstimate.qz"],
                    data["stateEstimate.qw"],
                ]
            ),
            "angular_velocity": np.radians([data["gyro.x"], data["gyro.y"], data["gyro.z"]]),  # firmware logs deg/s
        }

    def _on_pv(self, timestamp, data, logconf) -> None:
        if self._att is None:
            return
        self.on_state(
            {
                "position": np.array([data["stateEstimate.x"], data["stateEstimate.y"], data["stateEstimate.z"]]),
                "velocity": np.array([data["stateEstimate.vx"], data["stateEstimate.vy"], data["stateEstimate.vz"]]),
                **self._att,
            }
        )

    def close(self) -> None:
        # cflib's close_link() sends a zero-thrust setpoint first, and a low-level setpoint outranks the
        # high-level commander: after a hand-back that would cut the motors of a landing drone. So the
        # radio link is closed first; close_link() then only stops cflib's threads.
        link, self.cf.link = self.cf.link, None
        if link is not None:
            link.close()
        self.cf.close_link()
