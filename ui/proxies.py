"""Which peers may say who the client is: uvicorn rewrites a request's client address from `X-Forwarded-For` (and
its scheme from `X-Forwarded-Proto`) when the peer is trusted, and by default it trusts 127.0.0.1 and ::1. On a page
served on loopback that lets any local program, and anything a reverse proxy passes on, pick the address the
failed-login throttle counts (ui.login_throttle). Here only the proxies the operator names (--trusted-proxy) are
trusted; without one, the headers mean nothing and the peer's own address is the client.

Gradio's launch makes uvicorn's Config itself and passes no such setting, so the trust is handed over the way
uvicorn documents for that case: $FORWARDED_ALLOW_IPS, read when the Config is made (`forwarded_trust`), and
checked on the running server afterwards (`check_forwarded_trust`).
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
from collections.abc import Iterator, Sequence

FORWARDED_ENV = "FORWARDED_ALLOW_IPS"


def proxy_address(text: str) -> str:
    """`text` as a trusted proxy: an IP address or a network ("10.0.0.0/8"), normalised; ValueError otherwise."""
    value = text.strip().removeprefix("[").removesuffix("]")
    try:
        return str(ipaddress.ip_network(value, strict=False) if "/" in value else ipaddress.ip_address(value))
    except ValueError:
        raise ValueError(
            f"--trusted-proxy takes the IP address (or network, e.g. 10.0.0.0/24) of a reverse proxy, got {text!r}"
        ) from None


def trust_setting(proxies: Sequence[str]) -> str:
    """uvicorn's `forwarded_allow_ips` value that trusts exactly `proxies` ("" trusts no one)."""
    return ",".join(proxies)


@contextlib.contextmanager
def forwarded_trust(proxies: Sequence[str]) -> Iterator[None]:
    """While inside, a uvicorn Config made without its own `forwarded_allow_ips` trusts exactly `proxies`; the
    environment is restored on leaving (the Config keeps the value it read)."""
    before = os.environ.get(FORWARDED_ENV)
    os.environ[FORWARDED_ENV] = trust_setting(proxies)
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(FORWARDED_ENV, None)
        else:
            os.environ[FORWARDED_ENV] = before


def check_forwarded_trust(config: object, proxies: Sequence[str]) -> None:
    """Raises RuntimeError unless the running server's uvicorn `config` trusts exactly `proxies` (or reads no
    forwarded headers at all): a Gradio that made its Config another way must not silently trust loopback."""
    if not getattr(config, "proxy_headers", True):
        return
    if getattr(config, "forwarded_allow_ips", None) != trust_setting(proxies):
        raise RuntimeError("the page's server trusts X-Forwarded-For from peers not named by --trusted-proxy")
