"""Outputs that leave the process: the publisher fed by the event bus, and its sinks (MQTT, webhooks, ntfy, the digest).

Every output is one registered `OutputKind` (outputs/registry.py): its settings (flags and --config keys), its
sink's factory, the events it wants and where it runs in a fleet. Each registers itself at the bottom of its own
file; importing that file here is what adds it (ntfy.py is the short example)."""

from outputs.mqtt import MqttConfig, MqttSink
from outputs.ntfy import NtfyConfig, NtfySink
from outputs.publisher import OutputPublisher, Sink
from outputs.queued_sink import QueuedSink, SendSink
from outputs.registry import OUTPUTS, OutputKind, SinkContext, register
from outputs.webhook import WebhookConfig, WebhookSink

__all__ = [
    "OUTPUTS",
    "DigestConfig",
    "DigestSink",
    "MqttConfig",
    "MqttSink",
    "NtfyConfig",
    "NtfySink",
    "OutputKind",
    "OutputPublisher",
    "QueuedSink",
    "SendSink",
    "Sink",
    "SinkContext",
    "WebhookConfig",
    "WebhookSink",
    "register",
]

# registered after the sinks it feeds (the registry keeps their order: mqtt, webhook, ntfy first)
from outputs.digest import DigestConfig, DigestSink  # noqa: E402
