"""IPv6 addresses that carry an IPv4 address are judged by it (issue 39): 6to4 (2002::/16) passed the source
policy with a loopback or private IPv4 inside; so must IPv4-mapped (::ffff:0:0/96), NAT64 (64:ff9b::/96,
64:ff9b:1::/48), Teredo (2001::/32, the client's address) and IPv4-compatible (::/96) ones."""

from __future__ import annotations

import ipaddress

import pytest

from capture.policy import SourcePolicy, SourceRefused, parse_nets


def _teredo(client: str) -> str:
    server = int(ipaddress.IPv4Address("65.54.227.120"))
    hidden = int(ipaddress.IPv4Address(client)) ^ 0xFFFFFFFF
    return str(ipaddress.IPv6Address((0x20010000 << 96) | (server << 64) | hidden))


def _policy(*nets: str) -> SourcePolicy:
    return SourcePolicy(parse_nets(nets), resolver=lambda host: [])


@pytest.mark.parametrize(
    "address",
    ["2002:7f00:1::1", "2002:c0a8:101::1", "2002:a9fe:a9fe::", "::ffff:127.0.0.1", "64:ff9b::7f00:1",
     "64:ff9b::a00:1", "64:ff9b:1::c0a8:101", "::7f00:1", "::a00:1", _teredo("127.0.0.1"), _teredo("10.0.0.1")],
)  # fmt: skip
def test_an_embedded_internal_ipv4_is_refused(address: str) -> None:
    with pytest.raises(SourceRefused, match="address"):
        _policy().check(f"rtsp://[{address}]:554/stream")


@pytest.mark.parametrize("address", ["2002:7f00:1::1", "64:ff9b::7f00:1", _teredo("127.0.0.1")])
def test_allowing_the_ipv6_network_does_not_allow_the_ipv4_inside(address: str) -> None:
    with pytest.raises(SourceRefused):
        _policy("2002::/16", "64:ff9b::/96", "2001::/32").check(f"rtsp://[{address}]/stream")


def test_allowing_the_ipv4_network_allows_it_embedded() -> None:
    assert _policy("127.0.0.0/8").check("rtsp://[2002:7f00:1::1]/x") == "rtsp://[2002:7f00:1::1]/x"


@pytest.mark.parametrize("address", ["2002:5db8:d822::1", "64:ff9b::5db8:d822", "::ffff:93.184.216.34"])
def test_an_embedded_public_ipv4_is_allowed(address: str) -> None:
    assert _policy().check(f"rtsp://[{address}]/stream")


def test_a_host_name_resolving_to_6to4_of_loopback_is_refused() -> None:
    policy = SourcePolicy(resolver=lambda host: ["2002:7f00:1::1"])
    with pytest.raises(SourceRefused, match="127.0.0.1"):
        policy.check("rtsp://camera.example.com/stream")
