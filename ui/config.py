"""The web page's settings: where it listens and who may use it."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ui.access import AUTH_ENV, ip_literal, is_loopback
from ui.proxies import proxy_address

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
    headless_api: bool = False  # --api without a page serves here: its tokens guard it, not a login (app/config.py)
    max_upload_mb: int = field(default=500, metadata={"help": "largest video upload accepted", "unit": "MiB"})
    max_uploads: int = field(
        default=20, metadata={"help": "video files the page accepts per run (then: restart)"}
    )  # ui.upload_limits
    max_upload_total_mb: int = field(
        default=2000, metadata={"help": "MiB the page's uploads may take together per run", "unit": "MiB"}
    )
    no_login: bool = field(
        default=False,
        metadata={
            "flag": "--open",
            "help": "serve a page beyond loopback or behind a proxy (--allowed-host, --trusted-proxy) WITHOUT any "
            "login (every device that reaches it may use it)",
        },
    )
    allowed_hosts: tuple[str, ...] = field(
        default=(),
        metadata={
            "flag": "--allowed-host",
            "repeat": True,
            "metavar": "NAME",
            "help": "a name the page may be opened by (Host header; repeatable), e.g. the machine's DNS name or a "
            "reverse proxy's; loopback names, IP addresses and --host are always accepted, other names refused (DNS "
            "rebinding). It means others reach the page: a login is then required even on loopback (or --open)",
        },
    )
    trusted_proxies: tuple[str, ...] = field(
        default=(),
        metadata={
            "flag": "--trusted-proxy",
            "repeat": True,
            "metavar": "ADDR",
            "help": "the IP address (or network) of a reverse proxy in front of the page (repeatable): only its "
            "X-Forwarded-For names the client (the failed-login throttle counts per client). Without it the "
            "header is ignored and every client is its own peer address",
        },
    )

    def __post_init__(self) -> None:
        if not 0 < self.port < 65536:
            raise ValueError(f"--port must be 1..65535, got {self.port}")
        if self.max_upload_mb < 1:
            raise ValueError(f"--max-upload-mb must be >= 1, got {self.max_upload_mb}")
        if self.max_uploads < 1 or self.max_upload_total_mb < 1:
            raise ValueError("--max-uploads and --max-upload-total-mb must be >= 1")
        if self.no_login and self.auth is not None:
            raise ValueError(f"--open serves the page without a login: drop --auth-file / ${AUTH_ENV}, or --open")
        for name in self.allowed_hosts:
            if not HOST_NAME.fullmatch(name) and ip_literal(name) is None:
                raise ValueError(f"--allowed-host takes a host name or address without scheme or port, got {name!r}")
        self.allowed_hosts = tuple(name.lower().rstrip(".") for name in self.allowed_hosts)
        self.trusted_proxies = tuple(proxy_address(text) for text in self.trusted_proxies)
        guarded = self.auth is not None or self.no_login or self.headless_api
        if self.behind_proxy and not self.beyond_loopback and not guarded:
            flag = "--allowed-host" if self.allowed_hosts else "--trusted-proxy"
            raise ValueError(
                f"{flag} means the page is reached through a reverse proxy, so others can reach it: give it a login "
                f"(--auth-file FILE with one line user:password, chmod 600, or ${AUTH_ENV}), or --open to serve "
                "it without one"
            )

    @property
    def beyond_loopback(self) -> bool:
        """Whether anything but this machine can reach the page (a non-loopback --host, or --share)."""
        return self.share or not is_loopback(self.host)

    @property
    def behind_proxy(self) -> bool:
        """Whether the operator says a reverse proxy serves the page (--allowed-host, --trusted-proxy)."""
        return bool(self.allowed_hosts or self.trusted_proxies)

    @property
    def reachable_from_network(self) -> bool:
        """Beyond loopback, or through a proxy: who is not on this machine may reach the page."""
        return self.beyond_loopback or self.behind_proxy
