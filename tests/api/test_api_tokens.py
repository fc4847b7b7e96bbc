"""API tokens (api/auth.py): read from a private file or the environment, never argv; scopes checked; --api
refused beyond loopback without them (exit 2 before the model loads)."""

import pytest

from api.auth import LOCAL, Access, AuthError, access_for, given_tokens, parse_tokens
from api.server import open_api_warning
from app.cli import parse_args
from app.config import AppConfig
from tests.support.api_tokens import make_token

GOOD = make_token("good")


def config_from(argv, monkeypatch, env=None):
    monkeypatch.delenv("EDGE_ASSISTANT_API_TOKENS", raising=False)
    monkeypatch.delenv("EDGE_ASSISTANT_AUTH", raising=False)
    if env is not None:
        monkeypatch.setenv("EDGE_ASSISTANT_API_TOKENS", env)
    return AppConfig.from_args(parse_args(argv))


def tokens_file(tmp_path, text, mode=0o600):
    path = tmp_path / "tokens"
    path.write_text(text)
    path.chmod(mode)
    return path


def test_a_private_tokens_file_gives_named_tokens_with_scopes(tmp_path, monkeypatch):
    path = tokens_file(tmp_path, f"# comment\n\n{GOOD} read,ask phone\n{make_token('second')} manage\n")
    config = config_from(["--api", "--model", "tiny", "--api-tokens-file", str(path)], monkeypatch)
    phone, second = config.api.tokens
    assert (phone.name, phone.scopes) == ("phone", frozenset({"read", "ask"}))
    assert (second.name, second.scopes) == ("token-2", frozenset({"manage"}))
    assert GOOD not in repr(config.api) and GOOD not in repr(phone)
    assert config.api.headless and config.ui.host == "127.0.0.1"


@pytest.mark.parametrize(
    ("text", "mode", "message"),
    [
        (f"{GOOD} read\n", 0o644, "other users may read it"),
        (f"{GOOD} read,admin\n", 0o600, "unknown scope(s) admin"),
        ("short read\n", 0o600, "shorter than 16"),
        ("a" * 40 + " read\n", 0o600, "1 different character"),  # once accepted: any length of one letter
        ("abcabcabcabcabcabcab read\n", 0o600, "3 different characters"),
        (f"{GOOD}\n", 0o600, "expected TOKEN SCOPE"),
        (f"{GOOD} read a\n{GOOD} ask b\n", 0o600, "repeats"),
        ("# nothing\n", 0o600, "no token"),
    ],
)
def test_bad_tokens_files_are_refused_without_quoting_the_token(tmp_path, text, mode, message):
    path = tokens_file(tmp_path, text, mode)
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")) as err:
        given_tokens(path, {})
    assert GOOD not in str(err.value)


def test_tokens_from_the_environment(monkeypatch):
    env = f"{GOOD} ask;{make_token('reader')} read reader"
    config = config_from(["--api", "--model", "tiny"], monkeypatch, env=env)
    assert [t.name for t in config.api.tokens] == ["token-1", "reader"]


def test_the_api_beyond_loopback_needs_tokens(monkeypatch, tmp_path):
    with pytest.raises(ValueError, match="needs API tokens"):
        config_from(["--api", "--model", "tiny", "--host", "0.0.0.0"], monkeypatch)
    login = tokens_file(tmp_path, "me:secret-password\n")
    with pytest.raises(ValueError, match="needs API tokens"):
        config_from(["--api", "--model", "tiny", "--auth-file", str(login)], monkeypatch)
    opened = config_from(["--api", "--model", "tiny", "--host", "0.0.0.0", "--open"], monkeypatch)
    assert opened.api.tokens == ()  # --open: the operator's choice, as for the page
    assert config_from(["--api", "--model", "tiny", "--host", "0.0.0.0"], monkeypatch, env=f"{GOOD} read").api.tokens


@pytest.mark.parametrize("proxy", [["--allowed-host", "cams.example.org"], ["--trusted-proxy", "127.0.0.1"]])
def test_a_headless_api_behind_a_proxy_starts_on_tokens_alone(monkeypatch, tmp_path, proxy):
    """Behind a reverse proxy others reach the API: tokens guard it (no page login asked for), and without
    tokens it is refused like an API beyond loopback; a page behind a proxy still needs its login."""
    path = tokens_file(tmp_path, f"{GOOD} read\n")
    config = config_from(["--api", "--model", "tiny", *proxy, "--api-tokens-file", str(path)], monkeypatch)
    assert config.api.headless and config.api.tokens and config.ui.behind_proxy
    with pytest.raises(ValueError, match="behind a proxy.*needs API tokens"):
        config_from(["--api", "--model", "tiny", *proxy], monkeypatch)
    with pytest.raises(ValueError, match="give it a login"):
        config_from(["--ui", "--api", "--model", "tiny", *proxy, "--api-tokens-file", str(path)], monkeypatch)


def test_access_checks_scopes_and_tokens_in_constant_time():
    (token,) = parse_tokens(f"{GOOD} read reader", "here")
    access = Access((token,))
    assert access.check(f"Bearer {GOOD}", "read") == token
    for header, status in [(None, 401), ("Bearer nope-nope-nope-nope", 401), (f"Basic {GOOD}", 401)]:
        with pytest.raises(AuthError) as err:
            access.check(header, "read")
        assert err.value.status == status
    with pytest.raises(AuthError) as err:
        access.check(f"Bearer {GOOD}", "manage")
    assert err.value.status == 403
    assert access_for((), page_open_without_login=True).check(None, "manage") is LOCAL
    assert access_for((), page_open_without_login=False) is None


@pytest.mark.parametrize(
    ("argv", "warned"),
    [
        (["--host", "0.0.0.0", "--open"], True),  # anyone on the LAN: every scope, with no word said once
        (["--allowed-host", "cams.example", "--open"], True),  # behind a proxy
        ([], False),  # loopback: this machine only
        (["--host", "0.0.0.0", "--api-tokens-file", "TOKENS"], False),
    ],
)
def test_an_api_open_to_anyone_beyond_loopback_is_warned_about(tmp_path, monkeypatch, argv, warned):
    path = tokens_file(tmp_path, f"{GOOD} read")
    argv = [str(path) if a == "TOKENS" else a for a in argv]
    warning = open_api_warning(config_from(["--api", "--model", "tiny", *argv], monkeypatch))
    assert (warning is not None) is warned
    if warned:
        assert "every scope" in warning and "--api-tokens-file" in warning
