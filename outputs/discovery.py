"""The MQTT topics the assistant publishes and the Home Assistant discovery configs that announce them.

Pure functions of the config and the names: what goes where is readable (and testable) without a broker.
"""

from __future__ import annotations

import re
from typing import Any

from outputs.mqtt_config import MqttConfig

STATE_ON, STATE_OFF = "ON", "OFF"
ONLINE, OFFLINE = "online", "offline"
HA_STATE_MAX = 255  # Home Assistant keeps at most 255 characters of an entity's state
# Home Assistant binary_sensor device classes for alert names that have an obvious one (others: none)
DEVICE_CLASSES = {
    "person": "occupancy", "people": "occupancy", "occupancy": "occupancy", "presence": "presence",
    "motion": "motion", "smoke": "smoke", "fire": "smoke", "door": "door", "window": "window",
    "vehicle": "moving", "car": "moving", "gas": "gas", "water": "moisture", "leak": "moisture",
}  # fmt: skip


def available_topic(config: MqttConfig) -> str:
    return f"{config.prefix}/available"


def state_topic(config: MqttConfig, stream: str, alert: str) -> str:
    return f"{config.prefix}/{stream}/{alert}/state"


def snapshot_topic(config: MqttConfig, stream: str, alert: str) -> str:
    return f"{config.prefix}/{stream}/{alert}/snapshot"


def events_topic(config: MqttConfig, stream: str) -> str:
    return f"{config.prefix}/{stream}/events"


def answer_topic(config: MqttConfig, stream: str) -> str:
    return f"{config.prefix}/{stream}/answer"


def ask_topic(config: MqttConfig, stream: str | None = None) -> str:
    """Where a question is published: the plain text to `<prefix>/<stream>/ask` (the Home Assistant text entity's
    command topic), or JSON to `<prefix>/ask` (None)."""
    return f"{config.prefix}/ask" if stream is None else f"{config.prefix}/{stream}/ask"


def ask_result_topic(config: MqttConfig) -> str:
    return f"{config.prefix}/ask/result"


def watches_topic(config: MqttConfig) -> str:
    """Where a watch command (JSON) is published."""
    return f"{config.prefix}/watches/set"


def watches_result_topic(config: MqttConfig) -> str:
    return f"{config.prefix}/watches/result"


def node_id(config: MqttConfig) -> str:
    """The prefix as a Home Assistant node id ([a-zA-Z0-9_-]); also the device identifier."""
    return re.sub(r"[^a-zA-Z0-9_-]", "_", config.prefix)


def device_name(config: MqttConfig) -> str:
    """The Home Assistant device's name: `config.device_name`, else the prefix ("edge-assistant": "Edge assistant")."""
    return config.device_name or re.sub(r"[-_]+", " ", config.prefix).capitalize()


def entity_slug(text: str) -> str:
    """`text` as Home Assistant slugs an entity id: lowercase letters and digits joined by single `_`."""
    return re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_")


def _common(config: MqttConfig, domain: str, name: str, key: str) -> dict[str, Any]:
    """What every config holds; its entity id is `<domain>.<prefix>_<key>` (`default_entity_id`, Home Assistant
    2025.10+; `object_id` is deprecated and ignored from 2026.4)."""
    unique_id = f"{node_id(config)}_{key}"
    return {
        "name": name,
        "unique_id": unique_id,
        "default_entity_id": f"{domain}.{entity_slug(unique_id)}",
        "availability_topic": available_topic(config),
        "payload_available": ONLINE,
        "payload_not_available": OFFLINE,
        "device": {
            "identifiers": [node_id(config)],
            "name": device_name(config),
            "model": "edge-stream-assistant",
            "manufacturer": "edge-stream-assistant",
        },
        "origin": {"name": "edge-stream-assistant"},
    }


def alert_sensor_config(config: MqttConfig, stream: str, alert: str) -> tuple[str, dict[str, Any]]:
    """(topic, payload) announcing (stream, alert) as a binary_sensor reading the ON/OFF state topic."""
    payload = _common(config, "binary_sensor", f"{stream} {alert}", f"{stream}_{alert}")
    payload.update(state_topic=state_topic(config, stream, alert), payload_on=STATE_ON, payload_off=STATE_OFF)
    if alert in DEVICE_CLASSES:
        payload["device_class"] = DEVICE_CLASSES[alert]
    return f"{config.discovery_prefix}/binary_sensor/{node_id(config)}/{stream}_{alert}/config", payload


def snapshot_image_config(config: MqttConfig, stream: str, alert: str) -> tuple[str, dict[str, Any]]:
    """(topic, payload) announcing the alert's latest snapshot as an image entity (raw JPEG on the topic)."""
    payload = _common(config, "image", f"{stream} {alert} snapshot", f"{stream}_{alert}_snapshot")
    payload.update(image_topic=snapshot_topic(config, stream, alert), content_type="image/jpeg")
    return f"{config.discovery_prefix}/image/{node_id(config)}/{stream}_{alert}_snapshot/config", payload


def answer_sensor_config(config: MqttConfig, stream: str) -> tuple[str, dict[str, Any]]:
    """(topic, payload) announcing the stream's latest answer as a sensor: its state is the answer text cut to
    Home Assistant's 255 characters; the whole answer JSON (full text, question, round...) are its attributes."""
    payload = _common(config, "sensor", f"{stream} answer", f"{stream}_answer")
    payload.update(
        state_topic=answer_topic(config, stream),
        value_template=f"{{{{ value_json.answer[:{HA_STATE_MAX}] }}}}",
        json_attributes_topic=answer_topic(config, stream),
        icon="mdi:message-text-outline",
    )
    return f"{config.discovery_prefix}/sensor/{node_id(config)}/{stream}_answer/config", payload


def ask_text_config(config: MqttConfig, stream: str) -> tuple[str, dict[str, Any]]:
    """(topic, payload) announcing a text entity whose value, when set, is published as a question to the
    stream's ask topic (optimistic: no state topic; the answer comes on the answer sensor). At most Home
    Assistant's 255 characters; the assistant's own limit (--max-question-chars) applies on top."""
    payload = _common(config, "text", f"{stream} ask", f"{stream}_ask")
    payload.update(command_topic=ask_topic(config, stream), max=HA_STATE_MAX, icon="mdi:comment-question-outline")
    return f"{config.discovery_prefix}/text/{node_id(config)}/{stream}_ask/config", payload


def today_topic(config: MqttConfig, stream: str, alert: str) -> str:
    """The watch's day so far (JSON {"count", "on_s", "since"}, retained): with the timeline on only."""
    return f"{config.prefix}/{stream}/{alert}/today"


def recap_topic(config: MqttConfig) -> str:
    """Where a recap command is published: plain text (the time to recap since) or JSON."""
    return f"{config.prefix}/recap"


def recap_result_topic(config: MqttConfig) -> str:
    return f"{config.prefix}/recap/result"


def digest_topic(config: MqttConfig) -> str:
    """Where the scheduled digest (--digest-at) is published (JSON: its text and the recap)."""
    return f"{config.prefix}/digest"


def today_count_config(config: MqttConfig, stream: str, alert: str) -> tuple[str, dict[str, Any]]:
    """(topic, payload) announcing how many times the watch's alert began since local midnight (a sensor)."""
    key = f"{stream}_{alert}_today_count"
    payload = _common(config, "sensor", f"{stream} {alert} today", key)
    payload.update(
        state_topic=today_topic(config, stream, alert),
        value_template="{{ value_json.count }}",
        state_class="total_increasing",  # back to 0 at midnight: Home Assistant reads that as a new cycle
        icon="mdi:counter",
    )
    return f"{config.discovery_prefix}/sensor/{node_id(config)}/{key}/config", payload


def today_on_config(config: MqttConfig, stream: str, alert: str) -> tuple[str, dict[str, Any]]:
    """(topic, payload) announcing how long the watch's alert was on since local midnight (seconds, a duration)."""
    key = f"{stream}_{alert}_today_on"
    payload = _common(config, "sensor", f"{stream} {alert} on today", key)
    payload.update(
        state_topic=today_topic(config, stream, alert),
        value_template="{{ value_json.on_s }}",
        device_class="duration",
        unit_of_measurement="s",
        state_class="total_increasing",
    )
    return f"{config.discovery_prefix}/sensor/{node_id(config)}/{key}/config", payload
