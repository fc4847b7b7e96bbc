"""Where and how the MQTT sink connects: `mqtt://host[:port]` or `mqtts://host[:port]` (TLS), topic prefixes,
and credentials read from the environment or a file (never the command line, never in a repr or a log)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from outputs.credentials import MQTT_PASSWORD_ENV, MQTT_USERNAME_ENV, read_secret

DEFAULT_PORTS = {"mqtt": 1883, "mqtts": 8883}
URL_FORMS = "mqtt://HOST[:PORT] (default port 1883) or mqtts://HOST[:PORT] (TLS, default port 8883)"


def parse_mqtt_url(url: str) -> tuple[str, int, bool]:
    """(host, port, tls) of a broker URL; ValueError naming the allowed forms otherwise. Credentials in
    the URL are refused (and not echoed in the message)."""
    parts = urlsplit(url)
    if parts.username is not None or parts.password is not None:
        raise ValueError(
            f"the MQTT URL must not hold credentials; use {MQTT_USERNAME_ENV} and {MQTT_PASSWORD_ENV} "
            f"or a password file. Allowed: {URL_FORMS}"
        )
    if parts.scheme not in DEFAULT_PORTS or not parts.hostname:
        raise ValueError(f"invalid MQTT broker URL {url!r}: expected {URL_FORMS}")
    if parts.path not in ("", "/") or parts.query or parts.fragment:
        raise ValueError(f"invalid MQTT broker URL {url!r}: no path or query allowed; expected {URL_FORMS}")
    try:
        port = parts.port
    except ValueError:
        raise ValueError(f"invalid port in MQTT broker URL {url!r}: expected {URL_FORMS}") from None
    return parts.hostname, port or DEFAULT_PORTS[parts.scheme], parts.scheme == "mqtts"


def _check_prefix(name: str, value: str) -> None:
    # Control characters (a trailing newline) make mosquitto drop the connection as malformed.
    controls = any(ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F for c in value)
    if not value or value.startswith("/") or value.endswith("/") or any(c in value for c in "+#") or controls:
        raise ValueError(f"MQTT {name} must be a non-empty topic without + or #, control characters or a leading "
                         f"or trailing /, got {value!r}")  # fmt: skip


@dataclass(frozen=True)
class MqttConfig:
    """The MQTT sink's settings.

    Args:
        url: the broker, see `URL_FORMS`.
        prefix: the root of the assistant's topics (`<prefix>/available`, `<prefix>/<stream>/...`).
        discovery: publish Home Assistant discovery configs under `discovery_prefix`.
        discovery_prefix: Home Assistant's discovery root.
        username, password: broker credentials; build them with `MqttConfig.from_environment`. The password
            is left out of the repr.
        password_file: where the password was read from (None: the environment).
        ca_file: CA bundle for mqtts (None: the system's).
        client_id: MQTT client id ("" lets the broker pick one).
        keepalive_s: MQTT keepalive; a dead connection is noticed after about 1.5 times this.
        qos: QoS of every message (1: at least once; paho re-sends unacknowledged ones after a reconnect).
        backlog: messages (events, answers) kept while the broker is down; beyond it the oldest is dropped.
        reconnect_min_s, reconnect_max_s: paho's reconnect delay, doubling from min to max (seconds).
        device_name: the Home Assistant device grouping the assistant's entities (None: named after the prefix).
        commands: take commands from the broker (docs/mqtt-commands.md): questions on `<prefix>/<stream>/ask`
            (a Home Assistant `text` entity per stream) and `<prefix>/ask`, watches on `<prefix>/watches/set`.
            Anyone who may publish to those topics may ask and set watches: off unless asked for.
        command_rate_s, command_burst: commands taken per second on average, and at once (a token bucket);
            beyond, a command is refused ("rate"), and past as many refusals again, dropped unanswered (counted).
        command_max_bytes: a longer command payload is refused unread.
        min_on_s: an alert's ON state is held this long at least (seconds) before its OFF and, for a watch that
            ended meanwhile (a one-shot ends at its first begin), before its entities are removed: Home Assistant
            has time to make the entity and run its automations.
    """

    url: str = field(
        metadata={
            "flag": "--mqtt",
            "metavar": "URL",
            "help": "publish to this MQTT broker: mqtt://HOST[:PORT] or mqtts://HOST[:PORT]",
        }
    )
    prefix: str = field(default="edge-assistant", metadata={"flag": "--mqtt-prefix", "help": "topic prefix"})
    discovery: bool = field(
        default=True,
        metadata={
            "flag": "--mqtt-discovery",
            "help": "announce every watch and answer to Home Assistant (MQTT discovery)",
        },
    )
    discovery_prefix: str = field(
        default="homeassistant",
        metadata={"flag": "--mqtt-discovery-prefix", "help": "Home Assistant's discovery prefix"},
    )
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    password_file: Path | None = field(
        default=None,
        metadata={
            "flag": "--mqtt-password-file",
            "help": "file whose first line is the broker password (or set EDGE_ASSISTANT_MQTT_PASSWORD; the user "
            "name comes from EDGE_ASSISTANT_MQTT_USERNAME)",
        },
    )
    ca_file: Path | None = field(
        default=None,
        metadata={"flag": "--mqtt-ca-file", "help": "CA certificate for mqtts:// (none: the system's certificates)"},
    )
    client_id: str = ""
    keepalive_s: int = 30
    qos: int = 1
    backlog: int = 256
    reconnect_min_s: float = 1.0
    reconnect_max_s: float = 30.0
    device_name: str | None = None
    commands: bool = field(
        default=False,
        metadata={
            "flag": "--mqtt-commands",
            "help": "take questions and watches from the broker (a Home Assistant text entity per stream, and "
            "<prefix>/watches/set): anyone who may publish there may ask and set watches, see docs/security.md",
        },
    )
    command_rate_s: float = 2.0
    command_burst: int = 20
    command_max_bytes: int = 16_384
    min_on_s: float = 5.0

    def __post_init__(self) -> None:
        parse_mqtt_url(self.url)
        _check_prefix("prefix", self.prefix)
        _check_prefix("discovery_prefix", self.discovery_prefix)
        if self.qos not in (0, 1, 2):
            raise ValueError(f"MQTT qos must be 0, 1 or 2, got {self.qos}")
        if self.backlog < 1 or self.keepalive_s < 1:
            raise ValueError("MQTT backlog and keepalive_s must be at least 1")
        if not 0 < self.reconnect_min_s <= self.reconnect_max_s:
            raise ValueError("MQTT reconnect delays must satisfy 0 < reconnect_min_s <= reconnect_max_s")
        if not 0 <= self.min_on_s <= 3600:
            raise ValueError(f"MQTT min_on_s must be 0 to 3600 seconds, got {self.min_on_s}")
        if not self.command_rate_s > 0 or self.command_burst < 1 or self.command_max_bytes < 256:
            raise ValueError("MQTT commands need command_rate_s > 0, command_burst >= 1 and command_max_bytes >= 256")

    @property
    def host(self) -> str:
        return parse_mqtt_url(self.url)[0]

    @property
    def port(self) -> int:
        return parse_mqtt_url(self.url)[1]

    @property
    def tls(self) -> bool:
        return parse_mqtt_url(self.url)[2]

    @property
    def broker(self) -> str:
        """host:port, for messages."""
        return f"{self.host}:{self.port}"

    @classmethod
    def from_environment(
        cls, url: str, password_file: str | Path | None = None, env: Mapping[str, str] | None = None, **kwargs
    ) -> MqttConfig:
        """A config with the username from $EDGE_ASSISTANT_MQTT_USERNAME and the password from the first line
        of `password_file` if given, else from $EDGE_ASSISTANT_MQTT_PASSWORD (each None when unset)."""
        username = read_secret(None, MQTT_USERNAME_ENV, env)
        password = read_secret(password_file, MQTT_PASSWORD_ENV, env)
        password_path = Path(password_file) if password_file is not None else None
        return cls(url, username=username, password=password, password_file=password_path, **kwargs)
