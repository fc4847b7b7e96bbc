"""ntfy (https://ntfy.sh, or a self-hosted server): a phone notification when a watch's alert begins, and the
digest (`--digest-at`, `outputs.digest`) as its recap's short lines.

The whole output is this file: its settings (whose `url` field is the flag `--ntfy`, repeatable, and the
--config key `ntfy`), a `send`, and its registration at the bottom; `outputs.queued_sink.QueuedSink` runs it on
its own worker. The topic URL is a secret of sorts (anyone who knows it can read the topic), so messages show only
its scheme, host and port.

    sink = QueuedSink(NtfySink(NtfyConfig("https://ntfy.sh/my-door-alerts")), on_error=report)
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from bus import Alert, Event
from outputs.http_post import PostError, post
from outputs.queued_sink import QueuedSink
from outputs.recaps import Digest
from outputs.registry import OutputKind, SinkContext, register
from outputs.webhook import WebhookConfig


@dataclass(frozen=True)
class NtfyConfig:
    """url: the topic's http(s) URL (checked like a webhook's: no credentials, printable ASCII); timeout_s: the
    deadline of one request, seconds; priority: ntfy's 1 (min) .. 5 (max)."""

    url: str = field(
        metadata={
            "flag": "--ntfy",
            "metavar": "URL",
            "repeat": True,
            "help": "an ntfy topic URL: a notification per alert begin",
        }
    )
    timeout_s: float = 5.0
    priority: int = 4

    def __post_init__(self) -> None:
        try:
            WebhookConfig(self.url, timeout_s=self.timeout_s)  # the same URL and timeout rules
        except ValueError as err:
            raise ValueError(str(err).replace("webhook", "ntfy").split(". To prove")[0]) from None
        if self.priority not in range(1, 6):
            raise ValueError(f"ntfy priority must be one of 1, 2, 3, 4, 5, got {self.priority}")

    @property
    def display(self) -> str:
        return WebhookConfig(self.url).display


def _header(text: str) -> str:
    """A header value: printable ASCII only (names may be anyone's text; a newline must never split a header)."""
    return "".join(c if 0x20 <= ord(c) < 0x7F else "?" for c in text)[:200]


class NtfySink:
    """POSTs one line per alert begin (and each digest's lines) to the topic; raises PostError or OSError when it
    cannot (reported)."""

    def __init__(self, config: NtfyConfig) -> None:
        self.config = config
        self.name = f"ntfy {config.display}"
        self.mark_name = f"ntfy {config.url}"  # hashed in the delivery marks (bus.delivery_marks): the topic is secret
        self._ssl = ssl.create_default_context() if urlsplit(config.url).scheme == "https" else None

    def wants(self, event: Event) -> bool:
        return (isinstance(event, Alert) and event.began) or isinstance(event, Digest)

    def send(self, event: Event) -> None:
        if isinstance(event, Digest):  # the recap's lines, at the default priority: read when convenient
            body, headers = event.text, {"Title": "digest", "Priority": "3", "Tags": "memo"}
        elif isinstance(event, Alert):
            body = f"{event.alert} began on {event.stream} at t={event.stream_time:.0f} s (p_yes {event.p_yes:.2f})"
            title = _header(f"alert {event.alert}")
            headers = {"Title": title, "Priority": str(self.config.priority), "Tags": "warning"}
        else:
            return
        status = post(self.config.url, body.encode("utf-8"), headers, self.config.timeout_s, ssl_context=self._ssl)
        if not 200 <= status.status < 300:
            raise PostError(f"HTTP {status.status}", retry=False)


def _sink(config: NtfyConfig, context: SinkContext) -> QueuedSink:
    return QueuedSink(NtfySink(config), on_error=context.on_error)


register(OutputKind("ntfy", NtfyConfig, _sink, wants=(Alert, Digest)))  # head only: one notification per alert
