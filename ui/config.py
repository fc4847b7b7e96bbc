"""The web page's settings: where it listens and who may use it."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ui.access import AUTH_ENV, ip_literal, is_loopback

HOST_NAME = re.compile(r"[A-Za-z0-9_.-]+")


@dataclass
class UIConfig:
    """The web page: where it listens and who may use it (ui.access). `auth`: the login given through
    --auth-file or $EDGE_ASSISTANT_AUTH (never argv); `no_login`: --open, no login even beyond loopback;
    `allowed_hosts`: extra names accepted in the Host header (--allowed-host).

    A field with `metadata={"help": ...}` is a command-line flag and a --config key (app/config_flags.py)."""

    host: str = field(
        default="127.0.0.1",
        metadata={
            "help": "address the page listens on; anything but loopback (e.g. 0.0.0.0: every interface) needs a login"
        },
    )
    port: int = field(default=7860, metadata={"help": "port of the page"})
    share: bool = field(
        default=False,
        metadata={"help": "also publish a temporary public Gradio link (needs a login, as --host)"},
    )
    auth: tuple[str, str] | None = field(default=None, repr=False)
    max_upload_mb: int = field(default=500, metadata={"help": "largest video upload accepted", "unit": "MiB"})
    no_login: bool = field(
        default=False,
        metadata={
            "flag": "--open",
            "help": "serve a page beyond loopback WITHOUT any login (every device that reaches it may use it)",
        },
    )
    allowed_hosts: tuple[str, ...] = field(
        default=(),
        metadata={
            "flag": "--allowed-host",
            "repeat": True,
            "metavar": "NAME",
            "help": "a name the page may be opened by (Host header; repeatable), e.g. the machine's DNS name; "
            "loopback names, IP addresses and --host are always accepted, other names refused (DNS rebinding)",
        },
    )

    def __post_init__(self) -> None:
        if not 0 < self.port < 65536:
            raise ValueError(f"--port must be 1..65535, got {self.port}")
        if self.max_upload_mb < 1:
            raise ValueError(f"--max-upload-mb must be >= 1, got {self.max_upload_mb}")
        if self.no_login and self.auth is not None:
            raise ValueError(f"--open serves the page without a login: drop --auth-file / ${AUTH_ENV}, or --open")
        for name in self.allowed_hosts:
            if not HOST_NAME.fullmatch(name) and ip_literal(name) is None:
                raise ValueError(f"--allowed-host takes a host name or address without scheme or port, got {name!r}")
        self.allowed_hosts = tuple(name.lower().rstrip(".") for name in self.allowed_hosts)

    @property
    def beyond_loopback(self) -> bool:
        """Whether anything but this machine can reach the page (a non-loopback --host, or --share)."""
        return self.share or not is_loopback(self.host)
