"""Outputs that leave the process: the publisher fed by the event bus, and its sinks (webhooks, MQTT, ntfy).
A new sink is a class with `name`, `wants` and `send`, run by `QueuedSink` (see ntfy.py)."""

from outputs.mqtt import MqttConfig, MqttSink
from outputs.ntfy import NtfyConfig, NtfySink
from outputs.publisher import OutputPublisher, Sink
from outputs.queued_sink import QueuedSink, SendSink
from outputs.webhook import WebhookConfig, WebhookSink

__all__ = [
    "MqttConfig",
    "MqttSink",
    "NtfyConfig",
    "NtfySink",
    "OutputPublisher",
    "QueuedSink",
    "SendSink",
    "Sink",
    "WebhookConfig",
    "WebhookSink",
]
