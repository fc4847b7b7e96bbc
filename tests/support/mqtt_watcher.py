"""A real paho subscriber for the MQTT tests: records every message on every topic (`#`)."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass

import paho.mqtt.client as paho
from paho.mqtt.enums import CallbackAPIVersion

WAIT_S = 10.0


@dataclass
class Message:
    topic: str
    payload: bytes
    retain: bool

    def json(self) -> dict:
        return json.loads(self.payload)


class Watcher:
    """A paho subscriber to every topic (`#`) that records what arrives. `session` names a persistent
    session (QoS 1), so messages published while it reconnects are kept for it by the broker."""

    def __init__(self, port: int, session: str | None = None) -> None:
        self.messages: list[Message] = []
        self.cond = threading.Condition()
        self.subscribed = threading.Event()
        self.client = paho.Client(CallbackAPIVersion.VERSION2, client_id=session or "", clean_session=session is None)
        self.client.reconnect_delay_set(0.1, 0.3)
        self.client.on_connect = lambda c, u, f, rc, p: c.subscribe("#", qos=1)
        self.client.on_message = self._on_message
        self.client.on_subscribe = lambda c, u, mid, rcs, p: self.subscribed.set()
        self.client.connect("127.0.0.1", port)
        self.client.loop_start()

    def _on_message(self, client, userdata, msg) -> None:
        with self.cond:
            self.messages.append(Message(msg.topic, msg.payload, msg.retain))
            self.cond.notify_all()

    def wait_for(self, match: Callable[[Message], bool], what: str, since: int = 0, timeout: float = WAIT_S) -> Message:
        """The first message from index `since` on that matches; fails after `timeout` seconds."""

        def found() -> Message | None:
            return next((m for m in self.messages[since:] if match(m)), None)

        with self.cond:
            assert self.cond.wait_for(found, timeout), f"no {what}; got {[m.topic for m in self.messages]}"
            return found()

    def wait_topic(self, topic: str, payload: bytes | None = None, since: int = 0, timeout: float = WAIT_S) -> Message:
        return self.wait_for(
            lambda m: m.topic == topic and (payload is None or m.payload == payload),
            f"{topic} {payload!r}",
            since,
            timeout,
        )

    def close(self) -> None:
        self.client.disconnect()
        self.client.loop_stop()
