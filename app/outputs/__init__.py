"""Outputs that leave the process: the publisher fed by the event bus, and its sinks (webhooks, MQTT)."""

from app.outputs.mqtt import MqttConfig, MqttSink
from app.outputs.publisher import OutputPublisher, Sink
from app.outputs.webhook import WebhookConfig, WebhookSink

__all__ = ["MqttConfig", "MqttSink", "OutputPublisher", "Sink", "WebhookConfig", "WebhookSink"]
