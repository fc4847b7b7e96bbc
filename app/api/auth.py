"""Who may use the API: bearer tokens with scopes, from a private file (`--api-tokens-file`) or the environment
(`EDGE_ASSISTANT_API_TOKENS`), never argv, never logged; compared in constant time.

A token line is `TOKEN SCOPE[,SCOPE...] [NAME]` (blank lines and `#` comments skipped). Scopes: `read` (events,
history, the lists of streams and watches, status, models), `ask` (questions, chat), `manage` (add and remove
streams and watches). NAME (default `token-N`) is what limits count by and what a watch's `owner` says.

Without tokens the API answers without one only where the page would answer without a login (loopback, no
login given; or `--open`); anywhere else it refuses to start (`--api`) or stays off (`--ui`).
"""

from __future__ import annotations

import hmac
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from bus.private_file import read_private_text

TOKENS_ENV = "EDGE_ASSISTANT_API_TOKENS"
SCOPES = ("read", "ask", "manage")
MIN_TOKEN_CHARS = 16
MAX_TOKENS_FILE_BYTES = 64 * 1024
NAME = re.compile(r"[A-Za-z0-9_.@-]{1,64}")


@dataclass(frozen=True)
class ApiToken:
    """name: who holds it (never the secret). scopes: what it may do."""

    name: str
    scopes: frozenset[str]
    secret: str = field(default="", repr=False, compare=False)

    def may(self, scope: str) -> bool:
        return scope in self.scopes


LOCAL = ApiToken("local", frozenset(SCOPES))  # who calls where no token is needed


def parse_tokens(text: str, where: str) -> tuple[ApiToken, ...]:
    """The tokens of `text` (lines `TOKEN SCOPES [NAME]`); ValueError naming `where` and the line, never the
    token, for a short token, an unknown scope, a repeated token or name."""
    tokens: list[ApiToken] = []
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        parts = line.split()
        if len(parts) not in (2, 3):
            raise ValueError(f"{where} line {number}: expected TOKEN SCOPE[,SCOPE...] [NAME]")
        secret, scope_text = parts[0], parts[1]
        name = parts[2] if len(parts) == 3 else f"token-{len(tokens) + 1}"
        if len(secret) < MIN_TOKEN_CHARS:
            raise ValueError(
                f"{where} line {number}: the token is shorter than {MIN_TOKEN_CHARS} characters; make one with "
                "python3 -c 'import secrets; print(secrets.token_urlsafe(24))'"
            )
        scopes = frozenset(s.strip() for s in scope_text.split(",") if s.strip())
        unknown = sorted(scopes - set(SCOPES))
        if unknown or not scopes:
            allowed = ", ".join(SCOPES)
            raise ValueError(f"{where} line {number}: unknown scope(s) {', '.join(unknown)}; scopes: {allowed}")
        if not NAME.fullmatch(name):
            raise ValueError(f"{where} line {number}: a name is 1-64 letters, digits, _ . @ -")
        if any(t.name == name for t in tokens) or any(hmac.compare_digest(t.secret, secret) for t in tokens):
            raise ValueError(f"{where} line {number}: repeats an earlier token or name")
        tokens.append(ApiToken(name, scopes, secret))
    if not tokens:
        raise ValueError(f"{where}: no token in it (lines TOKEN SCOPE[,SCOPE...] [NAME])")
    return tuple(tokens)


def given_tokens(path: Path | None, environ: Mapping[str, str]) -> tuple[ApiToken, ...]:
    """--api-tokens-file (a private file: bus.private_file's rule), else $EDGE_ASSISTANT_API_TOKENS (lines, or
    entries separated by `;`), else none."""
    if path is not None:
        text = read_private_text(path, "--api-tokens-file", MAX_TOKENS_FILE_BYTES)
        return parse_tokens(text, f"--api-tokens-file {Path(path).expanduser()}")
    if environ.get(TOKENS_ENV):
        return parse_tokens(environ[TOKENS_ENV].replace(";", "\n"), f"${TOKENS_ENV}")
    return ()


class AuthError(Exception):
    """status 401 (no or unknown token) or 403 (the token lacks the scope)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class Access:
    """tokens: the accepted ones. anonymous: requests without a token act as LOCAL (every scope)."""

    tokens: tuple[ApiToken, ...] = ()
    anonymous: bool = False

    def check(self, authorization: str | None, scope: str) -> ApiToken:
        """The caller's token for a request with this Authorization header needing `scope`; AuthError."""
        if scope not in SCOPES:
            raise ValueError(f"unknown scope {scope!r}")
        token = self._token(authorization)
        if not token.may(scope):
            raise AuthError(403, f"this token may not do that: it needs the scope {scope!r}")
        return token

    def _token(self, authorization: str | None) -> ApiToken:
        if self.anonymous:  # no tokens here: whatever a client sends (an OpenAI client always sends a key) is moot
            return LOCAL
        if not authorization:
            raise AuthError(401, "a bearer token is required: Authorization: Bearer TOKEN")
        kind, _, secret = authorization.partition(" ")
        secret = secret.strip()
        if kind.lower() != "bearer" or not secret:
            raise AuthError(401, "use Authorization: Bearer TOKEN")
        found = None
        for token in self.tokens:  # every one compared, in constant time each
            if hmac.compare_digest(token.secret.encode(), secret.encode()):
                found = token
        if found is None:
            raise AuthError(401, "unknown token")
        return found


def access_for(tokens: tuple[ApiToken, ...], page_open_without_login: bool) -> Access | None:
    """Who may use the API: the tokens when given; else anyone reaching it where the page needs no login; None
    (no API) otherwise."""
    if tokens:
        return Access(tokens)
    if page_open_without_login:
        return Access(anonymous=True)
    return None
