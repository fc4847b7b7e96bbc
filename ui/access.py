"""Who may open the page: the login (from a file, the environment, or generated for the run), and the address
the page really listens on, said truthfully at start.

No Gradio here (the CLI reads logins before the heavy imports); the server side of these rules (the Host
header, failed logins) is ui.guard.
"""

from __future__ import annotations

import ipaddress
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from bus.private_file import read_private_line

AUTH_ENV = "EDGE_ASSISTANT_AUTH"
GENERATED_USER = "admin"
ALL_INTERFACES = ("0.0.0.0", "::", "")


def ip_literal(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """`host` as an IP address ("[::1]" too), or None for a name."""
    try:
        return ipaddress.ip_address(host.strip().removeprefix("[").removesuffix("]"))
    except ValueError:
        return None


def is_loopback(host: str) -> bool:
    """True for loopback addresses (127.0.0.0/8, ::1) and the names `localhost` and `*.localhost`, which
    resolve to loopback by definition (RFC 6761). Any other name counts as reachable from the network."""
    name = host.strip().lower().rstrip(".")
    address = ip_literal(name)
    if address is not None:
        return address.is_loopback
    return name == "localhost" or name.endswith(".localhost")


MIN_PASSWORD_CHARS = 12
# the passwords people try first, lower case; a password that is one of them with digits or "!" after it counts too
COMMON_PASSWORDS = frozenset(
    "password passw0rd p@ssw0rd qwerty qwertz azerty qwertyuiop asdfghjkl zxcvbnm letmein welcome admin "
    "administrator root toor changeme default secret iloveyou trustno1 monkey dragon football baseball soccer "
    "sunshine princess master shadow superman batman starwars whatever freedom abc abcdef abcdefgh "
    "correcthorsebatterystaple camera webcam jetson nvidia edge assistant edgeassistant gradio raspberry "
    "ubuntu debian linux hello helloworld test tester testing guest user login".split()
)
MAKE_ONE = "python3 -c 'import secrets; print(secrets.token_urlsafe(16))'"


def weak_password_reason(user: str, password: str) -> str | None:
    """Why `password` is too weak for the page (never quoting it), or None. Weak: shorter than 12 characters,
    a common password (also with digits or "!" after it, or a run of digits), made of at most 3 different
    characters, or little more than the user name."""
    lowered = password.lower()
    if len(password) < MIN_PASSWORD_CHARS:
        return f"it is shorter than {MIN_PASSWORD_CHARS} characters"
    if lowered.rstrip("0123456789!") in COMMON_PASSWORDS or lowered.isdigit() or lowered in COMMON_PASSWORDS:
        return "it is a common password"
    if len(set(password)) <= 3:
        return "it repeats a few characters"
    if user and len(lowered.replace(user.lower(), "")) < MIN_PASSWORD_CHARS // 2:
        return "it is mostly the user name"
    return None


def parse_login(text: str, where: str) -> tuple[str, str]:
    """`user:password` (the password may hold colons); ValueError naming `where` the text came from, also for a
    weak password (`weak_password_reason`): the page's login is all that keeps others off the assistant."""
    user, sep, password = text.strip().partition(":")
    if not sep or not user.strip() or not password:
        raise ValueError(f"{where} must hold one line user:password (both non-empty)")
    reason = weak_password_reason(user.strip(), password)
    if reason is not None:
        raise ValueError(
            f"{where}: the page's password is too weak ({reason}); use at least {MIN_PASSWORD_CHARS} characters "
            f"that are not a common password, e.g. one made by {MAKE_ONE}"
        )
    return user.strip(), password


def read_login_file(path: Path) -> tuple[str, str]:
    """The login in `path`: refused unless the file is the running user's and closed to group and others
    (chmod 600: bus.private_file's rule), since anyone who can read it can use the page."""
    return parse_login(read_private_line(path, "--auth-file"), f"--auth-file {path}")


def given_login(auth_file: Path | None, environ: Mapping[str, str]) -> tuple[str, str] | None:
    """The login given for the page: --auth-file, else $EDGE_ASSISTANT_AUTH, else None."""
    if auth_file is not None:
        return read_login_file(auth_file)
    if environ.get(AUTH_ENV):
        return parse_login(environ[AUTH_ENV], f"${AUTH_ENV}")
    return None


@dataclass(frozen=True)
class PageLogin:
    """The login the page asks for; `generated`: made for this run (printed once at start, kept nowhere)."""

    user: str
    password: str = ""
    generated: bool = False

    def __repr__(self) -> str:  # never the password in a traceback or a log line
        return f"PageLogin(user={self.user!r}, generated={self.generated})"


def page_login(given: tuple[str, str] | None, beyond_loopback: bool, no_login: bool) -> PageLogin | None:
    """The login the page requires: the given one (also on loopback); beyond loopback without one, a generated
    one; None on loopback without one, or beyond it with --open (`no_login`)."""
    if given is not None:
        return PageLogin(*given)
    if beyond_loopback and not no_login:
        return PageLogin(GENERATED_USER, secrets.token_urlsafe(18), generated=True)
    return None


def url_host(host: str) -> str:
    """`host` as it goes in a URL (IPv6 addresses in brackets)."""
    address = ip_literal(host)
    return f"[{address}]" if address is not None and address.version == 6 else host


def ready_lines(host: str, port: int, share_url: str | None, login: PageLogin | None) -> list[str]:
    """What the terminal says once the page listens: the real bind address (all interfaces said as such, with
    the loopback URL for this machine), the public link, and who may log in; a generated password is shown
    here, once. The first line starts with "page ready:"."""
    local = f"http://{url_host(host)}:{port}/"
    if host in ALL_INTERFACES:
        loop = "[::1]" if host == "::" else "127.0.0.1"
        first = (
            f"page ready: listening on all interfaces ({host or '0.0.0.0'}) port {port}: "
            f"open http://<this machine's address>:{port}/ (here: http://{loop}:{port}/)"
        )
    else:
        first = f"page ready: {local}"
    lines = [first]
    if share_url:
        lines.append(f"public link (anyone with it reaches the page's login): {share_url}")
    if login is None:
        return lines
    if login.generated:
        lines.append(
            f"login: user {login.user}, password {login.password}  (made for this run and shown only here; "
            f"--auth-file FILE or ${AUTH_ENV} sets your own)"
        )
    else:
        lines.append(f"login required: user {login.user}")
    return lines


def open_warning(host: str, port: int, share: bool, through: Sequence[str] = ()) -> str:
    """The --open warning: who can now drive the page without a login (`through`: the names of the reverse
    proxies in front of it, --allowed-host)."""
    where = "anyone with the public link" if share else f"anyone who can reach {url_host(host)}:{port}"
    if through and not share:
        where += f" or a proxy in front of it ({', '.join(through)})"
    return (
        f"WARNING: --open: the page has NO LOGIN and {where} can use it: watch and add sources, ask questions, "
        "read the history. Use it only on a network where every device is trusted."
    )
