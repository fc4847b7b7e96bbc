"""Which sources may be chosen while the assistant runs (capture.policy.SourcePolicy): rtsp(s)/http(s) URLs whose
hosts are public or inside an allowed network, cameras configured at start, files uploaded through the page.
Everything else (gst: pipelines, listening modes, local paths, other FFmpeg protocols, internal addresses) is
refused with what to do instead. Host names are resolved by a resolver the test gives: no DNS, no traffic."""

from __future__ import annotations

import ipaddress

import pytest

from capture.policy import SourcePolicy, SourceRefused, address_kind, parse_nets


def resolver(table: dict[str, list[str]]):
    def resolve(host: str) -> list[str]:
        if host not in table:
            raise OSError(f"[Errno -2] Name or service not known: {host}")
        return table[host]

    return resolve


HOSTS = {
    "camera.example.com": ["93.184.215.14"],
    "localhost": ["127.0.0.1", "::1"],
    "rebind.example.com": ["93.184.215.14", "192.168.1.20"],  # one public address, one private: refused
    "lan-cam": ["192.168.1.20"],
}
POLICY = SourcePolicy(cameras=frozenset({0}), resolver=resolver(HOSTS))


@pytest.mark.parametrize(
    ("source", "why"),
    [
        ("gst:v4l2src ! tee name=t ! appsink t. ! queue ! filesink location=/tmp/x", "gst: pipelines cannot"),
        ("gst:v4l2src ! appsink", "gst: pipelines cannot"),
        ("tcp://0.0.0.0:9000?listen=1", "'tcp:' sources cannot"),
        ("udp://0.0.0.0:9000", "'udp:' sources cannot"),
        ("rtmp://0.0.0.0/live?listen=1", "'rtmp:' sources cannot"),
        ("srt://:9000?mode=listener", "'srt:' sources cannot"),
        ("file:///etc/passwd", "'file:' sources cannot"),
        ("concat:/etc/hosts|/etc/passwd", "'concat:' sources cannot"),
        ("subfile,,start,0,end,0,,:/etc/passwd", "local paths cannot"),
        ("/etc/passwd", "local paths cannot"),
        ("videos/clip.mp4", "local paths cannot"),
        ("http://127.0.0.1:8080/admin", "127.0.0.1 is a loopback address"),
        ("http://localhost:8080/admin", "127.0.0.1 (localhost resolves to it) is a loopback address"),
        ("https://[::1]:8443/x", "::1 is a loopback address"),
        ("rtsp://[::ffff:127.0.0.1]/x", "127.0.0.1 (::ffff:127.0.0.1 resolves to it) is a loopback address"),
        ("http://169.254.169.254/latest/meta-data/", "169.254.169.254 is a link-local address"),
        ("rtsp://192.168.1.20/stream1", "192.168.1.20 is a private address"),
        ("rtsp://lan-cam/stream1", "192.168.1.20 (lan-cam resolves to it) is a private address"),
        ("http://rebind.example.com/live.ts", "192.168.1.20 (rebind.example.com resolves to it) is a private"),
        ("http://0.0.0.0:8080/x", "0.0.0.0 is an unspecified address"),
        ("rtsp://224.1.1.1/x", "224.1.1.1 is a multicast address"),
        ("http://100.64.0.1/x", "100.64.0.1 is a"),  # carrier-grade NAT: not public
        ("http://nowhere.invalid/x", "'nowhere.invalid' cannot be resolved"),
        ("http:///no-host", "names no host"),
        ("http://a.example.com\\@127.0.0.1/", "backslashes"),
        ("http://camera.example.com:99999/x", "cannot be read"),
        (3, "camera 3 was not configured at start (configured: 0)"),
        ("/dev/video2", "camera 2 was not configured"),
    ],
)
def test_hostile_or_internal_sources_are_refused_saying_why(source, why):
    with pytest.raises(SourceRefused) as refused:
        POLICY.check(source)
    assert why in str(refused.value)
    assert isinstance(refused.value, ValueError)  # the page and the terminal turn it into a message


def test_an_internal_address_is_refused_with_how_to_allow_its_network():
    with pytest.raises(SourceRefused) as refused:
        POLICY.check("rtsp://user:secret@192.168.1.20:554/stream1")
    message = str(refused.value)
    assert "--allow-source-net 192.168.1.0/24" in message and "allow_source_nets in --config" in message
    assert "secret" not in message  # the URL's credentials are not repeated
    with pytest.raises(SourceRefused, match="--allow-source-net 127.0.0.0/8"):
        POLICY.check("http://127.0.0.1:8080/")


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("rtsp://93.184.215.14:554/stream1", "rtsp://93.184.215.14:554/stream1"),
        ("RTSP://camera.example.com/stream1", "RTSP://camera.example.com/stream1"),  # rtsps: refused (pinned tests)
        ("https://camera.example.com/live/index.m3u8", "https://camera.example.com/live/index.m3u8"),
        ("http://user:pass@camera.example.com:8080/video.mjpg", "http://user:pass@camera.example.com:8080/video.mjpg"),
        ("http://[2606:2800:220:1:248:1893:25c8:1946]/x", "http://[2606:2800:220:1:248:1893:25c8:1946]/x"),
        (0, 0),
        ("0", 0),
        ("/dev/video0", 0),
    ],
)
def test_public_urls_and_configured_cameras_are_allowed(source, expected):
    assert POLICY.check(source) == expected


def test_allowed_networks_let_lan_and_loopback_cameras_in_and_nothing_else():
    policy = SourcePolicy(parse_nets(["192.168.1.0/24", "127.0.0.0/8"]), resolver=resolver(HOSTS))
    assert policy.check("rtsp://192.168.1.20/stream1") == "rtsp://192.168.1.20/stream1"
    assert policy.check("rtsp://lan-cam/stream1") == "rtsp://lan-cam/stream1"
    with pytest.raises(SourceRefused, match="::1 .* loopback"):  # localhost's IPv6 address is outside 127.0.0.0/8
        policy.check("http://localhost:8000/x.ts")
    assert policy.check("http://127.0.0.1:8000/x.ts") == "http://127.0.0.1:8000/x.ts"
    with pytest.raises(SourceRefused, match="192.168.2.7 is a private address"):
        policy.check("rtsp://192.168.2.7/stream1")
    with pytest.raises(SourceRefused, match="'tcp:' sources cannot"):  # a network allowed, not a protocol
        policy.check("tcp://127.0.0.1:9000?listen=1")


def test_uploads_are_allowed_only_inside_the_upload_folders(tmp_path):
    uploads = tmp_path / "uploads"
    (uploads / "abc").mkdir(parents=True)
    clip = uploads / "abc" / "clip.mp4"
    clip.write_bytes(b"x")
    outside = tmp_path / "secret.mp4"
    outside.write_bytes(b"x")
    (uploads / "link.mp4").symlink_to(outside)
    policy = SourcePolicy(upload_dirs=(uploads,))
    assert policy.check(str(clip), uploaded=True) == str(clip)
    for path in (outside, uploads / "abc" / ".." / ".." / "secret.mp4", uploads / "link.mp4"):
        with pytest.raises(SourceRefused, match="only files uploaded through the page"):
            policy.check(str(path), uploaded=True)
    with pytest.raises(SourceRefused, match="local paths cannot"):  # typed, not uploaded
        policy.check(str(clip))


def test_bad_networks_are_refused_naming_the_form():
    assert parse_nets(["10.0.0.0/8", " 192.168.1.7/24 ", "fd00::/8"])[1] == ipaddress.ip_network("192.168.1.0/24")
    for bad in ("10.0.0.0/33", "camera", ""):
        with pytest.raises(ValueError, match="give CIDR, e.g. 192.168.1.0/24"):
            parse_nets([bad])
    with pytest.raises(ValueError, match="list of CIDR strings"):
        parse_nets([24])


def test_address_kinds():
    kinds = {a: address_kind(ipaddress.ip_address(a)) for a in ("8.8.8.8", "10.1.1.1", "fe80::1", "::", "ff02::1")}
    assert kinds == {"8.8.8.8": None, "10.1.1.1": "private", "fe80::1": "link-local", "::": "unspecified",
                     "ff02::1": "multicast"}  # fmt: skip
