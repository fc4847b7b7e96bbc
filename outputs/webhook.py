"""Webhooks: each alert and answer (and each digest: `outputs.digest`) POSTed as JSON to a URL, signed with
HMAC-SHA256 when a secret is set.

Each webhook has its own bounded queue and thread, so a slow or unreachable receiver delays nobody else.
Connection errors, timeouts and 5xx answers are retried with exponential backoff; 4xx answers are not
(the receiver said the request itself is wrong), nor are redirects (never followed: a receiver must not be
able to send the signed request elsewhere). The first request given up is reported with its reason; further
ones are counted until a request gets through again (or the sink closes), then reported as one count.

A receiver is not trusted (`outputs.http_post`): only its status line is read (at most 64 KiB), and each
request has one deadline for all of it. The thread survives anything: an unexpected exception is reported
once and the worker restarts (`bus.supervisor`).

A fleet's spooled alerts and answers carry a durable key (`bus.receipt`): it goes in the `Idempotency-Key` header,
the same each time the event is sent (a head that died before its host heard the event was delivered sends it
again in the next run), so a receiver can drop a repeat. Such an event is held until its request got through or
was given up on, and only then acknowledged to its host.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple
from urllib.parse import urlsplit

from bus import Alert, Answer, Event
from bus.receipt import Receipt, delivered_before, hold, mark_delivered, receipt_of, release
from bus.reporting import ErrorCallback, call_reporter
from bus.supervisor import RestartPolicy
from bus.worker import BackgroundWorker
from outputs.credentials import WEBHOOK_SECRET_ENV, read_secret
from outputs.http_post import PostError, post
from outputs.payloads import alert_payload, answer_payload, to_json
from outputs.recaps import Digest
from outputs.registry import OutputKind, SinkContext, register

logger = logging.getLogger(__name__)

SIGNATURE_HEADER = "X-Edge-Assistant-Signature"
IDEMPOTENCY_HEADER = "Idempotency-Key"


class Request(NamedTuple):
    """One queued POST: its body and the receipt of the event it carries (None: the event has none)."""

    body: bytes
    receipt: Receipt | None = None

    @property
    def key(self) -> str | None:
        return None if self.receipt is None else self.receipt.key


@dataclass(frozen=True)
class WebhookConfig:
    """One webhook.

    Args:
        url: http:// or https:// URL the JSON is POSTed to. It may hold a token (many receivers put one in the
            path), so reprs and messages show only its scheme, host and port (`display`).
        secret: HMAC-SHA256 key for the signature header; None sends no signature. Never from the command
            line: use `WebhookConfig.from_environment`.
        secret_file: where the secret was read from (None: the environment, or no secret).
        timeout_s: the deadline of one request (connect, TLS, sending, the answer's status line), seconds.
        retries: further attempts after a failed first one (connection errors, timeouts, 5xx).
        backoff_s: wait before the first retry; doubles for each further one, at most `max_backoff_s`.
        queue_size: requests kept while the receiver is slow; beyond it the oldest is dropped (counted).
    """

    url: str = field(
        metadata={
            "flag": "--webhook",
            "metavar": "URL",
            "repeat": True,
            "help": "POST every alert and answer as JSON here",
        }
    )
    secret: str | None = field(default=None, repr=False)
    secret_file: Path | None = field(
        default=None,
        metadata={
            "flag": "--webhook-secret-file",
            "help": "file whose first line signs webhook bodies (HMAC-SHA256, header X-Edge-Assistant-Signature; or "
            "set EDGE_ASSISTANT_WEBHOOK_SECRET)",
        },
    )
    timeout_s: float = 5.0
    retries: int = 3
    backoff_s: float = 0.5
    max_backoff_s: float = 30.0
    queue_size: int = 64

    def __post_init__(self) -> None:
        if any(not 0x20 < ord(c) < 0x7F for c in self.url):
            raise ValueError(
                "webhook URL must be printable ASCII without spaces: percent-encode the rest of the path and "
                f"write a non-ASCII host name in punycode (xn--...), got {self.display!r}"
            )
        try:
            parts = urlsplit(self.url)
        except ValueError:
            raise ValueError("webhook URL must be http://HOST[:PORT]/PATH or https://..., got an invalid URL") from None
        if parts.username is not None or parts.password is not None:
            raise ValueError(
                f"webhook URL {self.display!r} must not hold credentials (user:password@): every local user sees a "
                f"command line. To prove requests come from the assistant, sign them with a secret from "
                f"--webhook-secret-file FILE or ${WEBHOOK_SECRET_ENV} (HMAC-SHA256, header {SIGNATURE_HEADER})"
            )
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"webhook URL must be http://HOST[:PORT]/PATH or https://..., got {self.display!r}")
        try:
            parts.port  # noqa: B018 (raises ValueError on a port that is not a number in range)
        except ValueError:
            raise ValueError(f"webhook URL has an invalid port: {self.display!r}") from None
        if self.timeout_s <= 0 or self.backoff_s < 0 or self.max_backoff_s < 0:
            raise ValueError("webhook timeout_s must be > 0 and backoff_s, max_backoff_s >= 0 (seconds)")
        if self.retries < 0 or self.queue_size < 1:
            raise ValueError("webhook retries must be >= 0 and queue_size >= 1")

    @property
    def display(self) -> str:
        """scheme://host[:port]/… : the URL without its path, query or credentials, for messages."""
        try:
            parts = urlsplit(self.url)
            if not parts.scheme or not parts.hostname or any(not 0x20 < ord(c) < 0x7F for c in parts.hostname):
                return "<not a URL>"
        except ValueError:
            return "<not a URL>"
        try:
            port = f":{parts.port}" if parts.port else ""
        except ValueError:
            port = ":?"
        return f"{parts.scheme}://{parts.hostname}{port}/…"

    def __repr__(self) -> str:
        secret = "set" if self.secret else None
        return (
            f"WebhookConfig(url={self.display!r}, secret={secret!r}, timeout_s={self.timeout_s}, "
            f"retries={self.retries}, backoff_s={self.backoff_s}, max_backoff_s={self.max_backoff_s}, "
            f"queue_size={self.queue_size})"
        )

    @classmethod
    def from_environment(
        cls, url: str, secret_file: str | Path | None = None, env: Mapping[str, str] | None = None, **kwargs
    ) -> WebhookConfig:
        """A config whose secret is the first line of `secret_file` if given, else $EDGE_ASSISTANT_WEBHOOK_SECRET
        (else none)."""
        secret_path = Path(secret_file) if secret_file is not None else None
        return cls(url, secret=read_secret(secret_file, WEBHOOK_SECRET_ENV, env), secret_file=secret_path, **kwargs)


def signature(body: bytes, secret: str) -> str:
    """The signature header's value: "sha256=" + hex HMAC-SHA256 of the exact body bytes."""
    return "sha256=" + hmac.new(secret.encode("utf-8"), body, hashlib.sha256).hexdigest()


def backoff_delay(config: WebhookConfig, retry: int) -> float:
    """Seconds to wait before retry number `retry` (0 for the first retry)."""
    return min(config.backoff_s * 2**retry, config.max_backoff_s)


def webhook_body(event: Event) -> bytes | None:
    """The JSON POSTed for an event, or None for events webhooks do not carry."""
    if isinstance(event, Alert):
        return to_json(alert_payload(event, with_snapshot=True))
    if isinstance(event, Answer):
        return to_json(answer_payload(event))
    if isinstance(event, Digest):
        return to_json(event.payload())
    return None


class WebhookSink:
    """POSTs alerts and answers to one webhook from its own thread (see the module docstring).

    Args:
        config: the webhook.
        on_error: called with a one-line message when a request is given up, requests are abandoned at close,
            or the worker crashed (and restarts).
        restarts: how a crashed worker restarts.
    """

    def __init__(
        self, config: WebhookConfig, on_error: ErrorCallback | None = None, restarts: RestartPolicy | None = None
    ) -> None:
        self.config = config
        self.name = f"webhook {config.display}"
        self.mark_name = f"webhook {config.url}"  # hashed in the delivery marks (bus.delivery_marks): may hold a token
        self.repeats_skipped = 0  # replayed events it had delivered before a fleet's head restarted
        self.on_error = on_error
        self.delivered = 0
        self.failed = 0
        self._failing = 0  # requests given up in a row (the first reported, the rest counted)
        self._ssl = ssl.create_default_context() if urlsplit(config.url).scheme == "https" else None
        self.worker: BackgroundWorker[Request] = BackgroundWorker(
            self.name,
            self._deliver,
            config.queue_size,
            on_error,
            restarts=restarts,
            items="requests",
            abort_grace_s=config.timeout_s + 1.0,
            on_discard=release,
        )

    @property
    def dropped(self) -> int:
        """Requests dropped: the oldest when the queue was full, plus those left at an aborted close."""
        return self.worker.dropped

    def start(self) -> None:
        self.worker.start()

    def handle(self, event: Event) -> None:
        if delivered_before(event, self.mark_name):
            self.repeats_skipped += 1
            return
        body = webhook_body(event)
        if body is not None:
            request = Request(body, receipt_of(event))
            hold(request)  # until the request got through or was given up on
            if not self.worker.put(request):
                release(request)

    def close(self, timeout: float) -> None:
        """Delivers what is queued for up to `timeout` seconds, then abandons the rest; joins the thread
        (which may need up to `timeout_s` more to finish a request already under way)."""
        self.worker.close(timeout)
        if self._failing > 1:
            call_reporter(self.on_error, f"{self.name}: {self._failing - 1} more requests given up since the first")
            self._failing = 1

    def _delivered(self) -> None:
        if self._failing > 1:
            message = f"{self.name}: delivering again; {self._failing - 1} more requests given up since the first"
            call_reporter(self.on_error, message)
        self._failing = 0
        self.delivered += 1

    def _deliver(self, request: Request) -> None:
        """POSTs the request, retrying as configured; reports the first request given up in a row; lets go of its
        event's receipt either way."""
        try:
            self._try(request)
        finally:
            release(request)

    def _try(self, request: Request) -> None:
        for attempt in range(self.config.retries + 1):
            retry, why = self._post(request.body, request.key)
            if why is None:
                mark_delivered(request, self.mark_name)
                self._delivered()
                return
            if not retry or attempt == self.config.retries:
                break
            delay = backoff_delay(self.config, attempt)
            logger.warning("%s: %s; retry %d in %.1f s", self.name, why, attempt + 1, delay)
            if self.worker.aborted.wait(delay):
                break
        self.failed += 1
        self._failing += 1
        if self._failing == 1:
            message = f"{self.name}: gave up on a request: {why} (further failures are counted until one gets through)"
            call_reporter(self.on_error, message)
        else:
            logger.warning("%s: gave up on a request: %s", self.name, why)

    def _post(self, body: bytes, key: str | None = None) -> tuple[bool, str | None]:
        """One POST (`key`: its Idempotency-Key, if any). Returns (retry?, None on success or why it failed)."""
        headers = {"Content-Type": "application/json", "User-Agent": "edge-stream-assistant"}
        if key is not None:
            headers[IDEMPOTENCY_HEADER] = key
        if self.config.secret:
            headers[SIGNATURE_HEADER] = signature(body, self.config.secret)
        try:
            status = post(self.config.url, body, headers, self.config.timeout_s, ssl_context=self._ssl).status
        except PostError as exc:
            return exc.retry, exc.reason
        if 200 <= status < 300:
            return False, None
        if 300 <= status < 400:
            return False, f"HTTP {status}: redirects are not followed (configure the URL the receiver answers at)"
        return status >= 500, f"HTTP {status}"


def _sink(config: WebhookConfig, context: SinkContext) -> WebhookSink:
    return WebhookSink(config, on_error=context.on_error)


register(
    OutputKind(
        "webhook",
        WebhookConfig,
        _sink,
        wants=(Alert, Answer, Digest),
        from_flags=WebhookConfig.from_environment,  # the secret from --webhook-secret-file or the environment
    )
)
