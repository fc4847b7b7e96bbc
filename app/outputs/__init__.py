"""Outputs that leave the process: the publisher fed by the event bus, and its sinks (webhooks, MQTT)."""

from app.outputs.publisher import OutputPublisher, Sink
from app.outputs.webhook import WebhookConfig, WebhookSink

__all__ = ["OutputPublisher", "Sink", "WebhookConfig", "WebhookSink"]
