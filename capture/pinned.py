"""Opening a network source at the address its host was checked at (``CaptureConfig.connect_to``): `pinned`.

FFmpeg resolves a URL's host itself, when it connects and at every reconnect; a DNS name whose answer changes
after ``capture.policy`` checked it (rebinding) would lead it to an address the policy refuses. So a source
chosen while running is opened at the checked IP instead:

- ``http(s)://``: the URL's host is replaced by the IP, and the name goes in the ``Host`` header (virtual hosts
  still answer; https loses SNI, and FFmpeg does not verify certificates by default anyway);
- ``rtsp://``: FFmpeg opens ``capture.rtsp_guard.RtspGuard`` on 127.0.0.1, which connects to the IP and refuses
  a redirect, which FFmpeg would otherwise follow to any host.
"""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

from capture.rtsp_guard import RtspGuard

_DEFAULT_PORTS = {"rtsp": 554, "http": 80, "https": 443}


def with_host(url: str, host: str, port: int | None) -> str:
    """`url` with its host and port replaced (an IPv6 `host` in brackets); login, path and query kept."""
    parts = urlsplit(url)
    login, at, _ = parts.netloc.rpartition("@")
    literal = f"[{host}]" if ":" in host else host
    netloc = f"{login}{at}{literal}" + (f":{port}" if port else "")
    return urlunsplit(parts._replace(netloc=netloc))


def pinned(url: str, address: str, timeout_s: float) -> tuple[str, str | None, RtspGuard | None]:
    """(the URL FFmpeg opens, the Host header to send or None, the relay to close with the source or None)
    for `url` checked at `address` (an IP). timeout_s: how long the relay waits to connect, seconds."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    port = parts.port or _DEFAULT_PORTS[scheme]
    if scheme == "rtsp":
        guard = RtspGuard(address, port, timeout_s)
        return with_host(url, "127.0.0.1", guard.port), None, guard
    return with_host(url, address, parts.port), parts.netloc.rpartition("@")[2], None
