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
from dataclasses import dataclass

from api.config import (  # noqa: F401 (the config layer's token reading, named here for the routes' readers)
    LOCAL,
    SCOPES,
    TOKENS_ENV,
    ApiToken,
    given_tokens,
    parse_tokens,
)


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


def question_owner(token: ApiToken, client: tuple[str, int] | None) -> str:
    """Whose budget of waiting questions (--api-questions-per-token) a question counts against: its token's; where
    no token is needed (loopback), its connection's, so that one local program's questions never hold another's
    back (together they are bounded by --max-pending-questions)."""
    if token is LOCAL and client is not None:
        return f"{token.name} {client[0]}:{client[1]}"
    return token.name
