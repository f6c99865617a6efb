"""What the Crazyflie's commander (the firmware's setpoint handling) does with streamed setpoints, for the
simulator bridge; the attitude and rate loops under it are the firmware model, sim/robots/crazyflie_firmware.py.

- thrust lock: thrust stays zero until one setpoint with zero thrust has been received;
- commander watchdog: after 0.5 s without setpoints the attitude is levelled (thrust kept),
  after 2 s the motors are stopped;
- emergency stop: motors off and locked until reboot.
"""

from __future__ import annotations

import numpy as np

WDT_LEVEL_S = 0.5
WDT_SHUTDOWN_S = 2.0


class CommanderEmulator:
    def __init__(self) -> None:
        self.unlocked = False
        self.locked_by_emergency = False
        self.setpoint = np.zeros(4)
        self.last_time: float | None = None
        self.watchdog_level_events = 0
        self.watchdog_shutdown_events = 0
        self._wdt_state = 0

    def on_setpoint(self, rpyt, t: float) -> None:
        rpyt = np.asarray(rpyt, dtype=np.float64)
        if not np.all(np.isfinite(rpyt)):
            return  # the wire format cannot carry NaN meaningfully; the firmware would ignore it
        if rpyt[3] == 0.0:
            self.unlocked = True
        self.setpoint = rpyt.copy()
        self.last_time = t
        self._wdt_state = 0

    def emergency_stop(self) -> None:
        self.locked_by_emergency = True

    def output(self, t: float) -> np.ndarray:
        """The setpoint the attitude controller follows at time t."""
        if self.locked_by_emergency or not self.unlocked or self.last_time is None:
            return np.zeros(4)
        age = t - self.last_time
        if age > WDT_SHUTDOWN_S:
            if self._wdt_state < 2:
                self.watchdog_shutdown_events += 1
                self._wdt_state = 2
            return np.zeros(4)
        out = self.setpoint.copy()
        if age > WDT_LEVEL_S:
            if self._wdt_state < 1:
                self.watchdog_level_events += 1
                self._wdt_state = 1
            out[:3] = 0.0
        return out
