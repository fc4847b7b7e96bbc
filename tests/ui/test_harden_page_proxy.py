"""Forwarded headers (X-Forwarded-For) are trusted only from the proxies the operator names (--trusted-proxy): the
failed-login throttle counts the real peer otherwise, so a forged header neither escapes the throttle nor locks
another client out. Live servers on 127.0.0.1."""

from __future__ import annotations

import httpx
import pytest

from app.cli import build_parser, parse_args
from app.config import AppConfig, UIConfig
from tests.support.harden_page_helpers import PASSWORD, Clock, free_port, login, served, throttle
from ui.access import AUTH_ENV


def test_forged_forwarded_for_values_do_not_escape_the_throttle():
    clock = Clock()
    with served(throttle=throttle(clock)) as (base, _), httpx.Client() as client:
        codes = [login(client, base, f"guess-{i}", {"X-Forwarded-For": f"10.9.0.{i}"}) for i in range(6)]
        assert codes[:3] == [400, 400, 400] and codes[3:] == [429, 429, 429]  # one peer, one count
        assert login(client, base, PASSWORD, {"X-Forwarded-For": "10.9.9.9"}) == 429


def test_a_forged_value_cannot_lock_out_the_client_it_names():
    clock = Clock()
    with served(throttle=throttle(clock)) as (base, _), httpx.Client() as attacker:
        for i in range(4):  # from 127.0.0.1, naming the victim's address
            login(attacker, base, f"guess-{i}", {"X-Forwarded-For": "127.0.0.2"})
        victim = httpx.Client(transport=httpx.HTTPTransport(local_address="127.0.0.2"))
        with victim:
            assert login(victim, base, PASSWORD) == 200
        assert login(attacker, base, PASSWORD) == 429  # the attacker's own address is the one locked


def test_a_named_proxy_is_trusted_and_its_clients_are_counted_apart():
    clock = Clock()
    ui = UIConfig(port=free_port(), trusted_proxies=("127.0.0.1",), auth=("ann", PASSWORD))
    with served(ui, throttle=throttle(clock)) as (base, _), httpx.Client() as client:
        attacker, other = {"X-Forwarded-For": "10.0.0.5"}, {"X-Forwarded-For": "10.0.0.6"}
        assert [login(client, base, f"guess-{i}", attacker) for i in range(4)] == [400, 400, 400, 429]
        assert login(client, base, PASSWORD, other) == 200  # the proxy's other client is not locked out
        assert login(client, base, PASSWORD, attacker) == 429


def test_trusted_proxies_are_addresses_or_networks():
    assert UIConfig(trusted_proxies=(" 10.0.0.1", "[::1]", "192.168.1.7/24"), no_login=True).trusted_proxies == (
        "10.0.0.1",
        "::1",
        "192.168.1.0/24",
    )
    with pytest.raises(ValueError, match="--trusted-proxy"):
        UIConfig(trusted_proxies=("proxy.lan",), no_login=True)


def test_the_flag_reaches_the_config(monkeypatch):
    monkeypatch.delenv(AUTH_ENV, raising=False)
    argv = ["--ui", "--open", "--trusted-proxy", "10.0.0.1", "--trusted-proxy", "10.0.0.2"]
    assert AppConfig.from_args(parse_args(argv)).ui.trusted_proxies == ("10.0.0.1", "10.0.0.2")
    assert "--trusted-proxy" in build_parser().format_help()
