"""Which sources may be chosen while the assistant runs: `SourcePolicy`.

Sources typed into the page (its source box, Add stream) or the terminal (``+NAME=SOURCE``) come from whoever
can reach those, so they get only what people need to watch a camera:

- ``rtsp://``, ``http://``, ``https://`` URLs whose host resolves to public addresses only; a
  loopback, link-local, private, shared, unspecified, multicast or reserved address only inside a network the
  operator allowed (``--allow-source-net CIDR``; cameras on a LAN sit on private addresses);
- camera indexes the operator configured at start;
- files uploaded through the page (paths inside the upload folders).

The host is resolved once, here: `checked` returns the address it checked, and the capture connects to that
address only (``CaptureConfig.connect_to``), so a DNS answer that changes later (rebinding) cannot move it.

Refused: ``rtsps://`` (its redirects cannot be seen inside TLS: give it at start), ``gst:`` pipelines, local
paths and ``file:`` URLs, every other FFmpeg protocol (``tcp://``, ``udp://``,
``rtmp://``, ``srt://``, ... which can listen on a port or read local data). Sources the operator gives at start
(command line, --config) are trusted and never pass through here; ``gst:`` ones are limited by
``capture.gst_pipeline``. What FFmpeg opens inside an accepted source is limited by the protocol whitelist
``capture.av_source`` passes (``protocol_whitelist``).
"""

from __future__ import annotations

import ipaddress
import re
import socket
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

ALLOWED_SCHEMES = ("rtsp", "http", "https")
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
Resolver = Callable[[str], list[str]]
"""``resolver(host)``: the addresses a host name resolves to (textual IPs); raises OSError when it cannot."""

_SCHEME_RE = re.compile(r"^([a-zA-Z][a-zA-Z0-9+.-]*):")
_HOST_RE = re.compile(r"^[A-Za-z0-9.-]+$")
_UNSAFE_CHARS = re.compile(r"[\s\\\x00-\x1f\x7f]")
# FFmpeg reads these items of an rtsp:// URL's query as transports: UDP and multicast RTP go to addresses the
# server names, the HTTP tunnel is another connection. Sources chosen while running use interleaved TCP only.
_RTSP_TRANSPORT_ITEMS = frozenset({"udp", "multicast", "http", "https"})


class SourceRefused(ValueError):
    """The source is not allowed while running; the message says why and what to do instead."""


def resolve_host(host: str) -> list[str]:
    """The addresses `host` resolves to now (IPv4 and IPv6), without duplicates."""
    infos = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


def parse_nets(values: Iterable[str]) -> tuple[IPNetwork, ...]:
    """``--allow-source-net`` values as networks; ValueError naming the bad one and the form expected."""
    nets = []
    for value in values:
        if not isinstance(value, str):
            raise ValueError(f"allow_source_nets must be a list of CIDR strings (e.g. '192.168.1.0/24'), got {value!r}")
        try:
            nets.append(ipaddress.ip_network(value.strip(), strict=False))
        except ValueError as err:
            raise ValueError(
                f"--allow-source-net {value!r} is not a network: {err}; give CIDR, e.g. 192.168.1.0/24"
            ) from err
    return tuple(nets)


_NAT64 = ipaddress.ip_network("64:ff9b::/96")  # well-known NAT64 prefix: the IPv4 in the last 32 bits
_NAT64_LOCAL = ipaddress.ip_network("64:ff9b:1::/48")  # local-use NAT64 (RFC 8215)
_IPV4_COMPATIBLE = ipaddress.ip_network("::/96")  # deprecated ::a.b.c.d (:: and ::1 are judged as themselves)


def judged_addresses(address: IPAddress) -> list[IPAddress]:
    """The addresses `address` stands for, each of which must pass: an IPv6 address that carries an IPv4 one is
    judged by it. Pure translations (IPv4-mapped ::ffff:0:0/96, NAT64 64:ff9b::/96, 6to4 2002::/16: the traffic
    reaches the IPv4 host) by the IPv4 alone; Teredo (2001::/32, its client), local NAT64 and IPv4-compatible
    addresses by both."""
    if isinstance(address, ipaddress.IPv4Address):
        return [address]
    low32 = ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    if address.ipv4_mapped is not None:
        return [address.ipv4_mapped]
    if address in _NAT64:
        return [low32]
    if address.sixtofour is not None:
        return [address.sixtofour]
    if address.teredo is not None:
        return [address, address.teredo[1]]
    if address in _NAT64_LOCAL or (address in _IPV4_COMPATIBLE and int(address) > 1):
        return [address, low32]
    return [address]


def address_kind(address: IPAddress) -> str | None:
    """Why `address` is not a public one ('loopback', 'private', ...), or None when it is public."""
    for kind in ("unspecified", "loopback", "link_local", "multicast", "private", "reserved"):
        if getattr(address, f"is_{kind}"):
            return kind.replace("_", "-")
    return None if address.is_global else "not public"


def suggested_net(address: IPAddress) -> str:
    """The network to name in --allow-source-net for `address`: its /24 (IPv4), /64 (IPv6), 127.0.0.0/8 for loopback."""
    if address.is_loopback:
        return "127.0.0.0/8" if address.version == 4 else "::1/128"
    return str(ipaddress.ip_network(f"{address}/{24 if address.version == 4 else 64}", strict=False))


@dataclass(frozen=True)
class SourcePolicy:
    """What may be watched when chosen while running (see the module docstring).

    allow_nets: networks whose non-public addresses are allowed anyway (``--allow-source-net``).
    cameras: camera indexes configured at start. upload_dirs: folders the page's uploads land in.
    resolver: resolves host names (tests pass their own).
    """

    allow_nets: tuple[IPNetwork, ...] = ()
    cameras: frozenset[int] = frozenset()
    upload_dirs: tuple[Path, ...] = ()
    resolver: Resolver = field(default=resolve_host, compare=False, repr=False)

    def __post_init__(self) -> None:
        if any(not isinstance(net, (ipaddress.IPv4Network, ipaddress.IPv6Network)) for net in self.allow_nets):
            object.__setattr__(self, "allow_nets", parse_nets(str(net) for net in self.allow_nets))
        object.__setattr__(self, "cameras", frozenset(int(c) for c in self.cameras))
        object.__setattr__(self, "upload_dirs", tuple(Path(d) for d in self.upload_dirs))

    def check(self, source: str | int, uploaded: bool = False) -> str | int:
        """Returns `source` when it may be watched; raises SourceRefused saying why not and what is allowed.
        uploaded: the page says it is a file uploaded through it (then it must lie in an upload folder)."""
        return self.checked(source, uploaded)[0]

    def checked(self, source: str | int, uploaded: bool = False) -> tuple[str | int, str | None]:
        """As `check`, with the address a URL's host was checked at (an IP, to connect to), None for others."""
        if uploaded:
            return self._check_upload(str(source)), None
        if isinstance(source, int) or (isinstance(source, str) and source.strip().isdigit()):
            return self._check_camera(int(source)), None
        text = str(source).strip()
        if re.fullmatch(r"/dev/video\d+", text):
            return self._check_camera(int(text.removeprefix("/dev/video"))), None
        if text.startswith("gst:"):
            raise SourceRefused(
                "gst: pipelines cannot be chosen while running (they can write files and open ports); "
                "give a camera pipeline at start with --camera gst:... or --stream NAME=gst:..."
            )
        match = _SCHEME_RE.match(text)
        scheme = match.group(1).lower() if match else None
        if scheme == "rtsps":
            raise SourceRefused(
                "rtsps:// sources cannot be chosen while running (a redirect inside TLS cannot be checked); give "
                "the camera's rtsp:// URL, or the rtsps:// one at start with --stream NAME=URL"
            )
        if scheme not in ALLOWED_SCHEMES:
            what = f"'{scheme}:' sources" if scheme else "local paths"
            raise SourceRefused(
                f"{what} cannot be chosen while running; allowed: {', '.join(ALLOWED_SCHEMES)} URLs, "
                "files uploaded through the page and the cameras configured at start (give other sources at start "
                "with --video, --camera or --stream)"
            )
        return self._check_url(text, scheme)

    def _check_camera(self, index: int) -> int:
        if index in self.cameras:
            return index
        configured = ", ".join(str(c) for c in sorted(self.cameras)) or "none"
        raise SourceRefused(
            f"camera {index} was not configured at start (configured: {configured}); only cameras given at start "
            "with --camera or --stream NAME=INDEX can be chosen while running"
        )

    def _check_upload(self, path: str) -> str:
        resolved = Path(path).resolve()
        if any(resolved.is_relative_to(folder.resolve()) for folder in self.upload_dirs):
            return path
        raise SourceRefused("only files uploaded through the page can be watched from it; upload the video file")

    def _check_url(self, text: str, scheme: str) -> tuple[str, str]:
        if _UNSAFE_CHARS.search(text):
            raise SourceRefused("the URL holds spaces, backslashes or control characters; type it without them")
        try:
            parts = urlsplit(text)
            host, _ = parts.hostname, parts.port  # a bad port raises here
        except ValueError as err:
            raise SourceRefused(f"the {scheme}:// URL cannot be read: {err}") from err
        if not host:
            raise SourceRefused(f"the {scheme}:// URL names no host; e.g. {scheme}://camera.example.com/stream")
        if scheme == "rtsp":
            query = text.rsplit("?", 1)[1] if "?" in text else ""  # FFmpeg reads the items after the last '?'
            asked = {item.split("=", 1)[0].lower() for item in query.split("&")} & _RTSP_TRANSPORT_ITEMS
            if asked:
                raise SourceRefused(
                    f"the rtsp:// URL asks FFmpeg for another transport ({', '.join(sorted(asked))}); "
                    "sources chosen while running are read over the RTSP connection itself: leave that out"
                )
        addresses = self._addresses(host)
        for address in addresses:
            for judged in judged_addresses(address):
                self._check_address(host, judged)
        # all of them passed; connect to one (IPv4 first: an IPv6 address without an IPv6 route would not fall back)
        return text, str(next((a for a in addresses if a.version == 4), addresses[0]))

    def _addresses(self, host: str) -> list[IPAddress]:
        try:
            return [ipaddress.ip_address(host)]
        except ValueError:
            pass
        if not _HOST_RE.fullmatch(host):
            raise SourceRefused(f"the host {host!r} is not a valid host name")
        try:
            addresses = [ipaddress.ip_address(a.split("%")[0]) for a in self.resolver(host)]
        except (OSError, ValueError) as err:
            raise SourceRefused(f"the host {host!r} cannot be resolved ({err}); check the name") from err
        if not addresses:
            raise SourceRefused(f"the host {host!r} resolves to no address; check the name")
        return addresses

    def _check_address(self, host: str, address: IPAddress) -> None:
        kind = address_kind(address)
        if kind is None or any(address in net for net in self.allow_nets if net.version == address.version):
            return
        via = "" if host == str(address) else f" ({host} resolves to it)"
        article = "an" if kind[0] in "aeiou" else "a"
        raise SourceRefused(
            f"{address}{via} is {article} {kind} address; a source chosen while running may reach one only inside a "
            f"network allowed at start: e.g. --allow-source-net {suggested_net(address)} for cameras on that LAN "
            "(repeatable; allow_source_nets in --config)"
        )
