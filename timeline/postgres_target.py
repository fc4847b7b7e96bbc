"""Where a PostgreSQL timeline lives: `postgresql://[user@]host[:port]/dbname`, and its password.

The password never travels in the URL (a command line is visible to every user of the machine, and URLs end up
in logs): it comes from `--timeline-password-file` (its first line; refused when others may read it), else from
$EDGE_ASSISTANT_TIMELINE_PASSWORD, else from $PGPASSWORD (or libpq's own ~/.pgpass when none is set). Showing a
target always goes through `bus.redact.redact_source`. psycopg is not imported here.

    target = PostgresTarget.from_url("postgresql://assistant@db.lan/timeline", password_file=None)
    str(target)  # 'postgresql://***@db.lan:5432/timeline'

How the password is protected on the way (`connect_kwargs`): libpq's defaults (`sslmode=prefer`, any
authentication method) hand it in clear to whatever answers at the address, a fake server that refuses TLS
included. So:
- beyond loopback: `sslmode=verify-full` (TLS, and the server's certificate must match its name under a CA the
  system or `PGSSLROOTCERT` trusts) unless the URL says otherwise (`?sslmode=require`, ...: a warning names
  what is lost), and `require_auth=scram-sha-256` (the password never leaves in clear or as md5);
- on loopback (`localhost`, 127.0.0.0/8, ::1, a Unix socket folder): the given sslmode, and
  `require_auth=!password,!md5` (trust, peer and SCRAM still work; cleartext and md5 are refused);
- libpq before 16 has no `require_auth`: beyond loopback the password goes only to a verified server
  (`verify-full`; a weaker sslmode is refused there), on loopback nothing refuses cleartext (a warning says so).
"""

from __future__ import annotations

import ipaddress
import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import parse_qsl, unquote, urlsplit

from bus.private_file import read_private_line
from bus.redact import redact_source

logger = logging.getLogger(__name__)

SCHEMES = ("postgresql", "postgres")
REQUIRE_AUTH_LIBPQ = 160000  # libpq 16 brought require_auth
VERIFIED = "verify-full"
SCRAM_ONLY = "scram-sha-256"
NO_CLEARTEXT = "!password,!md5"
DEFAULT_PORT = 5432
PASSWORD_ENV = "EDGE_ASSISTANT_TIMELINE_PASSWORD"
LIBPQ_PASSWORD_ENV = "PGPASSWORD"
SSLMODES = ("disable", "allow", "prefer", "require", "verify-ca", "verify-full")
FORM = "postgresql://[user@]host[:port]/dbname"
NO_PASSWORD_IN_URL = (
    "a password inside the --timeline URL is refused (command lines and logs are readable by others): "
    f"give it in ${PASSWORD_ENV}, ${LIBPQ_PASSWORD_ENV} or --timeline-password-file"
)


def is_postgres_url(text: object) -> bool:
    """True for `postgresql://...` and `postgres://...` (any case)."""
    return isinstance(text, str) and text.split("://", 1)[0].lower() in SCHEMES and "://" in text


@dataclass(frozen=True)
class PostgresTarget:
    """A PostgreSQL database to keep the timeline in. `user` None: libpq's default ($PGUSER, else the login
    name). `password` is never shown (repr, str) nor compared."""

    host: str
    dbname: str
    port: int = DEFAULT_PORT
    user: str | None = None
    password: str | None = field(default=None, repr=False, compare=False)
    sslmode: str | None = None
    connect_timeout_s: int = 5

    def __post_init__(self) -> None:
        if not self.host or not self.dbname:
            raise ValueError(f"--timeline needs a host and a database name: {FORM}")
        if not 1 <= self.port <= 65535:
            raise ValueError(f"--timeline port must be 1..65535, got {self.port}")
        if self.sslmode is not None and self.sslmode not in SSLMODES:
            raise ValueError(f"--timeline sslmode must be one of {', '.join(SSLMODES)}, got {self.sslmode!r}")
        if self.connect_timeout_s < 1:
            raise ValueError(f"connect_timeout_s must be >= 1, got {self.connect_timeout_s}")
        if self.sslmode not in (None, VERIFIED) and not self.loopback:
            logger.warning(
                "timeline %s: sslmode=%s beyond loopback: the server's certificate is not checked against its name "
                "(%s), so a machine that takes over the address can read the timeline; use sslmode=verify-full "
                "with the server's CA (PGSSLROOTCERT) unless this network is yours alone",
                self, self.sslmode, "no TLS at all" if self.sslmode in ("disable", "allow") else "TLS, unverified",
            )  # fmt: skip

    @property
    def loopback(self) -> bool:
        """True for `localhost`, a loopback address or a Unix socket folder (a host starting with '/')."""
        if (
            self.host.startswith("/")
            or self.host.lower() in ("localhost", "localhost.")
            or self.host.lower().endswith(".localhost")
        ):
            return True
        try:
            return ipaddress.ip_address(self.host.strip("[]")).is_loopback
        except ValueError:
            return False

    @classmethod
    def from_url(
        cls, url: str, password_file: str | Path | None = None, env: Mapping[str, str] | None = None
    ) -> PostgresTarget:
        """Parses `url` and reads the password (see the module). ValueError (never quoting a password) for a
        password in the URL, a malformed URL, or a password file that is unreadable, empty or not private."""
        try:
            parts = urlsplit(url.strip())
            port = parts.port or DEFAULT_PORT
        except ValueError:
            raise ValueError(f"invalid --timeline URL {redact_source(url)!r}: expected {FORM}") from None
        if parts.password is not None:
            raise ValueError(NO_PASSWORD_IN_URL)
        if parts.scheme.lower() not in SCHEMES:
            raise ValueError(f"invalid --timeline URL: expected {FORM}")
        dbname = unquote(parts.path.lstrip("/"))
        if not parts.hostname or not dbname or "/" in dbname or parts.fragment:
            raise ValueError(f"invalid --timeline URL {redact_source(url)!r}: expected {FORM}")
        options = dict(parse_qsl(parts.query, keep_blank_values=True))
        unknown = set(options) - {"sslmode"}
        if unknown:
            raise ValueError(f"--timeline URL: only the sslmode option is taken, not {', '.join(sorted(unknown))}")
        user = unquote(parts.username) if parts.username else None
        env = os.environ if env is None else env
        if password_file is not None:
            password: str | None = read_password_file(Path(password_file))
        else:
            password = env.get(PASSWORD_ENV) or env.get(LIBPQ_PASSWORD_ENV) or None
        return cls(parts.hostname, dbname, port, user, password, options.get("sslmode"))

    @property
    def url(self) -> str:
        """The URL without a password (still pass it through `redact_source` to show it: it names the user)."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        user = f"{self.user}@" if self.user else ""
        return f"postgresql://{user}{host}:{self.port}/{self.dbname}"

    def __str__(self) -> str:
        return redact_source(self.url)

    def connect_kwargs(self, libpq_version: int = REQUIRE_AUTH_LIBPQ) -> dict[str, object]:
        """Keyword arguments for `psycopg.connect` (password included; never log them). `libpq_version`:
        `psycopg.pq.version()` (e.g. 180006); how TLS and the authentication method are required depends on it
        (see the module). ValueError for a weaker sslmode beyond loopback on a libpq without require_auth."""
        kwargs: dict[str, object] = {
            "host": self.host,
            "port": self.port,
            "dbname": self.dbname,
            "connect_timeout": self.connect_timeout_s,
            "application_name": "edge-stream-assistant",
            # a server that vanishes without closing the connection is noticed within about half a minute
            "keepalives": 1,
            "keepalives_idle": 10,
            "keepalives_interval": 5,
            "keepalives_count": 3,
            "tcp_user_timeout": 30_000,
        }
        for name in ("user", "password", "sslmode"):
            if getattr(self, name) is not None:
                kwargs[name] = getattr(self, name)
        if not self.loopback:
            kwargs.setdefault("sslmode", VERIFIED)
        if libpq_version >= REQUIRE_AUTH_LIBPQ:
            kwargs["require_auth"] = NO_CLEARTEXT if self.loopback else SCRAM_ONLY
        elif not self.loopback and kwargs["sslmode"] != VERIFIED:
            raise ValueError(
                f"timeline {self}: libpq {libpq_version // 10000} cannot refuse a cleartext password "
                "(require_auth needs libpq 16), so beyond loopback only sslmode=verify-full is accepted; "
                "upgrade psycopg (pip install -U 'psycopg[binary]') or drop the sslmode option"
            )
        elif self.loopback and self.password is not None:
            logger.warning("timeline %s: libpq %d cannot refuse a cleartext password request "
                           "(require_auth needs libpq 16)", self, libpq_version // 10000)  # fmt: skip
        return kwargs


def read_password_file(path: Path) -> str:
    """The first line of `path`. ValueError (naming the file, never its content) unless it is a regular file
    that only its owner may read or write (libpq's rule for ~/.pgpass: bus.private_file) and its first line
    is not empty."""
    return read_private_line(path, "--timeline-password-file")
