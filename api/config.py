"""The HTTP API's settings and tokens, read once with the rest of the config (the config layer: api/ stands
on it, never the other way). Its limits are flags generated from the fields with a help text
(app/config_flags.py); the tokens come from a private file (`--api-tokens-file`) or the environment
(`EDGE_ASSISTANT_API_TOKENS`), never argv, never logged.

A token line is `TOKEN SCOPE[,SCOPE...] [NAME]` (blank lines and `#` comments skipped). Scopes: `read` (events,
history, the lists of streams and watches, status, models), `ask` (questions, chat), `manage` (add and remove
streams and watches). NAME (default `token-N`) is what limits count by and what a watch's `owner` says.
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
MIN_TOKEN_DISTINCT = 8  # different characters: "aaaa..." or "abcabc..." is a guess, not a secret
MAKE_TOKEN = "python3 -c 'import secrets; print(secrets.token_urlsafe(24))'"
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
    token, for a short or repetitive token, an unknown scope, a repeated token or name."""
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
                + MAKE_TOKEN
            )
        if (distinct := len(set(secret))) < MIN_TOKEN_DISTINCT:
            raise ValueError(
                f"{where} line {number}: the token has {distinct} different character{'s' * (distinct > 1)} (at "
                f"least {MIN_TOKEN_DISTINCT}: a repeated letter or pattern is easy to guess); make one with "
                + MAKE_TOKEN
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


@dataclass(frozen=True)
class ApiConfig:
    """headless: `--api`, the API served alone (no page). tokens: from --api-tokens-file or the environment."""

    headless: bool = False
    tokens: tuple[ApiToken, ...] = field(default=(), repr=False)
    watches_per_token: int = field(
        default=64, metadata={"flag": "--api-watches-per-token", "help": "runtime watches one API token may hold"}
    )
    max_watches: int = field(
        default=256, metadata={"flag": "--api-max-watches", "help": "runtime watches in all (every token together)"}
    )
    questions_per_token: int = field(
        default=4,
        metadata={"flag": "--api-questions-per-token", "help": "questions one API token may have waiting for answers"},
    )
    sse_clients: int = field(
        default=16, metadata={"flag": "--api-sse-clients", "help": "event feeds (Server-Sent Events) open at once"}
    )
    sse_queue: int = field(
        default=256,
        metadata={
            "flag": "--api-sse-queue",
            "help": "events waiting for one event-feed client; a client further behind is dropped (counted)",
        },
    )
    replay: int = field(
        default=1000,
        metadata={"flag": "--api-replay", "help": "events kept for feed clients resuming with Last-Event-ID"},
    )
    answer_timeout_s: float = field(
        default=300.0, metadata={"flag": "--api-answer-timeout", "help": "seconds an API question waits for its answer"}
    )
    max_body_kb: int = field(
        default=64, metadata={"flag": "--api-max-body-kb", "help": "largest API request body (KiB)"}
    )

    def __post_init__(self) -> None:
        for name in ("watches_per_token", "max_watches", "questions_per_token", "sse_clients", "sse_queue",
                     "replay", "max_body_kb"):  # fmt: skip
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"--api-{name.replace('_', '-')} must be a whole number >= 1, got {value!r}")
        if not self.answer_timeout_s > 0:
            raise ValueError(f"--api-answer-timeout must be > 0 seconds, got {self.answer_timeout_s!r}")
