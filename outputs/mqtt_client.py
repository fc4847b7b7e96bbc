"""paho's MQTT client with a network thread that never dies silently.

`loop_start()` runs `loop_forever()` in paho's thread (paho documents this); an exception raised there (by a
callback, or by paho itself) would end that thread, and with it every reconnect, without a word. Here
`loop_forever` runs under `bus.supervisor.run_supervised`: the crash is reported once and the loop
restarts after a backoff (bounded), picking up the connection where it was or reconnecting.
"""

from __future__ import annotations

import threading
from typing import Any

import paho.mqtt.client as paho

from bus.reporting import ErrorCallback
from bus.supervisor import RestartPolicy, run_supervised


class SupervisedClient(paho.Client):
    """A paho client whose `loop_forever` (paho's thread body under `loop_start`) restarts after a crash.

    Args:
        name: names the worker in reports.
        on_error: gets one line per crash (the exception's type, never its text).
        restarts: the restart policy.
        *args, **kwargs: paho.Client's.

    Call `stop_restarts()` before `loop_stop()` so a loop waiting to restart ends at once.
    """

    def __init__(
        self, *args: Any, name: str, on_error: ErrorCallback | None, restarts: RestartPolicy, **kwargs: Any
    ) -> None:
        super().__init__(*args, **kwargs)
        self._supervisor_name = name
        self._supervisor_on_error = on_error
        self._supervisor_policy = restarts
        self._supervisor_stop = threading.Event()

    def stop_restarts(self) -> None:
        self._supervisor_stop.set()

    def loop_forever(self, timeout: float = 1.0, retry_first_connection: bool = False) -> paho.MQTTErrorCode:
        result = paho.MQTTErrorCode.MQTT_ERR_SUCCESS

        def work() -> None:
            nonlocal result
            result = super(SupervisedClient, self).loop_forever(timeout, retry_first_connection)

        run_supervised(
            self._supervisor_name, work, self._supervisor_on_error, self._supervisor_stop, self._supervisor_policy
        )
        return result
