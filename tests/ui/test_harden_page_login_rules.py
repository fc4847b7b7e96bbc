"""Who must log in, decided before the page is served: a page reachable through a reverse proxy (--allowed-host,
--trusted-proxy) needs a login even on 127.0.0.1 (or --open, with the warning), and a weak page password is
refused with the way to make a good one."""

from __future__ import annotations

import pytest

from app.cli import parse_args
from app.config import AppConfig
from tests.support.in_process_main import run_app_here
from ui.access import AUTH_ENV, open_warning, weak_password_reason


def config_from(argv: list[str], monkeypatch, env: str | None = None) -> AppConfig:
    if env is None:
        monkeypatch.delenv(AUTH_ENV, raising=False)
    else:
        monkeypatch.setenv(AUTH_ENV, env)
    return AppConfig.from_args(parse_args(["--ui", *argv]))


@pytest.mark.parametrize("flags", [["--allowed-host", "box.lan"], ["--trusted-proxy", "127.0.0.1"]])
def test_a_page_behind_a_proxy_without_a_login_is_refused(flags, monkeypatch):
    with pytest.raises(ValueError) as refused:
        config_from(flags, monkeypatch)
    message = str(refused.value)
    assert flags[0] in message and "--auth-file" in message and AUTH_ENV in message and "--open" in message


def test_a_page_behind_a_proxy_runs_with_a_login_or_open(monkeypatch):
    ui = config_from(["--allowed-host", "box.lan"], monkeypatch, env="ann:a-long-test-password").ui
    assert ui.auth is not None and ui.behind_proxy and not ui.beyond_loopback
    opened = config_from(["--allowed-host", "box.lan", "--open"], monkeypatch).ui
    assert opened.no_login and opened.reachable_from_network
    assert not config_from([], monkeypatch).ui.reachable_from_network  # plain loopback: no login needed
    warning = open_warning("127.0.0.1", 7860, False, through=opened.allowed_hosts)
    assert "NO LOGIN" in warning and "box.lan" in warning


def test_the_app_exits_2_instead_of_serving_a_proxied_page_without_a_login(monkeypatch):
    monkeypatch.delenv(AUTH_ENV, raising=False)
    result = run_app_here("--ui", "--model", "tiny", "--port", "1", "--allowed-host", "box.lan")
    assert result.returncode == 2, result.stdout + result.stderr
    assert "--allowed-host" in result.stderr and "--open" in result.stderr and "Traceback" not in result.stderr
    assert "page ready" not in result.stdout


@pytest.mark.parametrize(
    "password", ["zq", "short pw", "elevenchars", "password1234", "correcthorsebatterystaple", "ann-ann-ann-ann"]
)
def test_a_weak_page_password_is_refused_without_showing_it(password, monkeypatch):
    assert weak_password_reason("ann", password) is not None
    with pytest.raises(ValueError) as refused:
        config_from([], monkeypatch, env=f"ann:{password}")
    message = str(refused.value)
    assert "weak" in message and AUTH_ENV in message and "token_urlsafe" in message and password not in message


def test_a_weak_password_in_a_login_file_is_refused(tmp_path, monkeypatch):
    path = tmp_path / "login"
    path.write_text("a:b\n")
    path.chmod(0o600)
    with pytest.raises(ValueError, match="--auth-file .*weak"):
        config_from(["--auth-file", str(path)], monkeypatch)


@pytest.mark.parametrize("password", ["a-long-test-password", "pa:ss word long", "Tr0ub4dor&3xyz"])
def test_a_good_password_is_accepted(password, monkeypatch):
    assert weak_password_reason("ann", password) is None
    assert config_from([], monkeypatch, env=f"ann:{password}").ui.auth == ("ann", password)
