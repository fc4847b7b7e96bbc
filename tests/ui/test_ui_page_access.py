"""Who may open the page, decided before it is served: loopback or not, the login from a file or the environment
(never argv), a generated one beyond loopback, --open, and what the terminal says about the address."""

from __future__ import annotations

import os

import pytest

from app.cli import parse_args
from app.config import AppConfig, UIConfig
from tests.support.in_process_main import run_app_here
from ui.access import AUTH_ENV, given_login, is_loopback, open_warning, page_login, ready_lines


def config_from(argv: list[str], monkeypatch, env: str | None = None) -> AppConfig:
    if env is None:
        monkeypatch.delenv(AUTH_ENV, raising=False)
    else:
        monkeypatch.setenv(AUTH_ENV, env)
    return AppConfig.from_args(parse_args(["--ui", *argv]))


def login_file(tmp_path, text="ann:pa:ss word long\n", mode=0o600):
    path = tmp_path / "login"
    path.write_text(text)
    path.chmod(mode)
    return path


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.2", "::1", "[::1]", "localhost", "LocalHost.", "a.localhost"])
def test_loopback_hosts(host):
    assert is_loopback(host)


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "", "192.168.1.20", "10.0.0.1", "box.lan", "localhost.evil.example"])
def test_hosts_beyond_loopback(host):
    assert not is_loopback(host)


def test_the_argv_login_is_refused_with_exit_2_and_the_way_to_give_one():
    result = run_app_here("--ui", "--model", "tiny", "--auth", "ann:secret")
    assert result.returncode == 2
    assert "--auth is refused" in result.stderr and "--auth-file" in result.stderr and AUTH_ENV in result.stderr
    assert "Traceback" not in result.stderr


def test_a_login_file_only_its_owner_can_read_is_used(tmp_path, monkeypatch):
    ui = config_from(["--auth-file", str(login_file(tmp_path))], monkeypatch).ui
    assert ui.auth == ("ann", "pa:ss word long") and not ui.beyond_loopback
    assert "pa:ss word" not in repr(ui)  # never in a traceback or a log line


@pytest.mark.parametrize(
    ("text", "mode", "owner", "expected"),
    [
        ("ann:pw\n", 0o644, None, "other users may read it"),
        ("ann:pw\n", 0o640, None, "other users may read it"),
        ("ann:pw\n", 0o600, 65534, "belongs to another user"),
        ("ann\n", 0o600, None, "user:password"),
        ("", 0o600, None, "empty"),
        (":pw\n", 0o600, None, "user:password"),
    ],
)
def test_a_login_file_others_could_read_or_that_is_malformed_is_refused(tmp_path, text, mode, owner, expected):
    path = login_file(tmp_path, text, mode)
    if owner is not None:
        if os.geteuid() != 0:
            pytest.skip("giving a file to another user needs root")
        os.chown(path, owner, -1)
    with pytest.raises(ValueError, match=expected):
        given_login(path, {})


def test_a_missing_login_file_is_a_clear_error(tmp_path):
    with pytest.raises(ValueError, match="--auth-file .*No such file"):
        given_login(tmp_path / "nope", {})


def test_the_login_from_the_environment(monkeypatch):
    ui = config_from(["--host", "0.0.0.0"], monkeypatch, env="ann:from the environment").ui
    assert ui.auth == ("ann", "from the environment") and ui.beyond_loopback
    with pytest.raises(ValueError, match=AUTH_ENV):
        config_from([], monkeypatch, env="no-colon")


def test_beyond_loopback_without_a_login_one_is_made_for_the_run():
    first, second = page_login(None, True, False), page_login(None, True, False)
    assert first.generated and first.user == "admin" and len(first.password) >= 20
    assert first.password != second.password
    assert first.password not in repr(first)


def test_who_needs_a_login(monkeypatch):
    assert page_login(None, beyond_loopback=False, no_login=False) is None  # loopback: none by default
    assert page_login(("ann", "pw"), beyond_loopback=False, no_login=False).user == "ann"  # a given one is used
    assert page_login(None, beyond_loopback=True, no_login=True) is None  # --open
    assert config_from(["--share"], monkeypatch).ui.beyond_loopback
    assert config_from(["--host", "::"], monkeypatch).ui.beyond_loopback


def test_open_with_a_login_is_a_contradiction(monkeypatch):
    with pytest.raises(ValueError, match="--open"):
        config_from(["--host", "0.0.0.0", "--open"], monkeypatch, env="ann:a-long-test-password")


@pytest.mark.parametrize("name", ["http://box.lan", "box.lan:7860", "abc:7860", "box lan", ""])
def test_allowed_hosts_are_names_only(name):
    with pytest.raises(ValueError, match="--allowed-host"):
        UIConfig(allowed_hosts=(name,))


def test_allowed_hosts_may_be_ip_addresses_and_are_compared_in_lower_case():
    names = UIConfig(allowed_hosts=("Box.Lan.", "fe80::1", "[::1]"), no_login=True).allowed_hosts
    assert names == ("box.lan", "fe80::1", "[::1]")


def test_all_interfaces_are_said_as_such_with_a_generated_password_shown_once():
    login = page_login(None, True, False)
    lines = ready_lines("0.0.0.0", 7861, None, login)
    assert lines[0].startswith("page ready: listening on all interfaces (0.0.0.0) port 7861")
    assert "localhost" not in "\n".join(lines) and "http://127.0.0.1:7861/" in lines[0]
    assert sum(login.password in line for line in lines) == 1


def test_a_given_password_is_never_printed():
    lines = ready_lines("192.168.1.20", 7860, None, page_login(("ann", "s3cret"), True, False))
    assert lines[0] == "page ready: http://192.168.1.20:7860/" and "s3cret" not in "\n".join(lines)
    assert ready_lines("::1", 7860, None, None) == ["page ready: http://[::1]:7860/"]


def test_the_open_warning_says_who_can_use_the_page():
    assert "NO LOGIN" in open_warning("0.0.0.0", 7860, False) and "0.0.0.0:7860" in open_warning("0.0.0.0", 7860, False)
    assert "public link" in open_warning("127.0.0.1", 7860, True)
