"""Names and other checked strings are matched whole (issue 39): `re.match` with `$` lets a trailing newline
through (`"door\\n"`), which then reaches MQTT topics (mosquitto drops the connection as malformed), file names
and the terminal."""

from __future__ import annotations

import pytest

from app.streams import check_name
from capture.policy import SourcePolicy, SourceRefused
from model.config import ModelConfig
from watches.spec import WatchSpec


@pytest.mark.parametrize("name", ["door\n", "door\r\n", "\ndoor"])
def test_a_stream_name_with_a_newline_is_refused(name: str) -> None:
    with pytest.raises(ValueError, match="bad stream name"):
        check_name(name)
    assert check_name("door") == "door"


def test_an_alert_name_or_its_streams_with_a_newline_are_refused() -> None:
    with pytest.raises(ValueError, match="bad alert name"):
        WatchSpec(name="person\n", question="is there a person?")
    with pytest.raises(ValueError, match="stream names"):
        WatchSpec(name="person", question="is there a person?", streams=("door\n",))
    WatchSpec(name="person", question="is there a person?", streams=("door",))


def test_a_device_with_a_newline_is_refused() -> None:
    with pytest.raises(ValueError):
        ModelConfig(device="cpu\n")


def test_a_host_name_with_a_newline_is_refused() -> None:
    policy = SourcePolicy(resolver=lambda host: ["93.184.216.34"])
    with pytest.raises(SourceRefused, match="not a valid host name"):
        policy._addresses("camera.example.com\n")
    assert policy._addresses("camera.example.com")


# (gst: pipelines are split on whitespace first, so a newline there is a blank; their checks use fullmatch too.)


@pytest.mark.parametrize("prefix", ["edge\n", "edge\x00", "ed\rge"])
def test_an_mqtt_prefix_with_a_control_character_is_refused(prefix: str) -> None:
    from outputs.mqtt_config import MqttConfig

    with pytest.raises(ValueError, match="control characters"):
        MqttConfig(url="mqtt://127.0.0.1:1883", prefix=prefix)
