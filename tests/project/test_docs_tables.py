"""The docs' tables that come from a registry cannot go stale: the outputs table is written from the registry
(scripts/docs_tables.py) and must equal what it writes; the policies tables of docs/cache.md name exactly the
registered policies, each with its settings class and flags; the routes table of docs/api.md names exactly the
routes the API serves (method and path)."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

from api.asking import Asks
from api.auth import Access, parse_tokens
from api.config import ApiConfig
from api.context import ApiContext
from api.feed import EventFeed
from api.server import OPENAPI_PATH, api_routes
from app.config_flags import flag_fields, flag_of
from bus import Alert, EventBus
from cache.policies import POLICIES
from outputs.ntfy import NtfyConfig
from outputs.registry import OUTPUTS, OutputKind
from scripts import docs_tables
from tests.support.api_tokens import make_token

DOCS = Path(__file__).resolve().parents[2] / "docs"


def table(path: Path, header: str) -> list[list[str]]:
    """The rows (cells stripped) of the Markdown table whose header line starts with `header`."""
    lines = path.read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(header))
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip("|").split(" | ")])
    return rows


def test_the_generated_tables_equal_what_their_registries_write():
    assert docs_tables.stale() == [], "run: python scripts/docs_tables.py"
    assert "`ntfy` | `--ntfy` (one per value, repeatable) | `alert`, `digest`" in docs_tables.current("outputs")


def test_an_output_registered_later_makes_the_outputs_table_stale(monkeypatch):
    monkeypatch.setitem(OUTPUTS, "pager", OutputKind("pager", NtfyConfig, lambda settings, context: None, (Alert,)))
    assert docs_tables.stale() == ["outputs"] and "`pager`" in docs_tables.outputs_table()


def test_the_policy_tables_name_every_registered_policy_with_its_settings_and_flags():
    named = {re.match(r"`([\w-]+)`", row[0]).group(1) for row in table(DOCS / "cache.md", "| policy | keeps |")}
    assert named == set(POLICIES), named ^ set(POLICIES)
    settings_rows = table(DOCS / "cache.md", "| policy | settings class |")
    described = {}
    for row in settings_rows:
        for name in re.findall(r"`([\w-]+)`", row[0]):
            described[name] = row
    assert set(described) == set(POLICIES), set(described) ^ set(POLICIES)
    for name, (_, settings_class, settings) in described.items():
        cls = POLICIES[name].settings_class
        assert settings_class == f"`{cls.__name__}`", (name, settings_class, cls.__name__)
        fields = {field.name for field in dataclasses.fields(cls)}
        assert all(f"`{field}`" in settings for field in fields), (name, settings, fields)  # every setting named
        flags = {flag_of(field) for field in flag_fields(cls)}
        assert set(re.findall(r"`(--[\w-]+)`", settings)) <= flags, (name, settings, flags)
        if not fields:
            assert settings == "none", (name, settings)


def served_routes() -> set[tuple[str, str]]:
    class Cameras:
        bus = EventBus()

        def desk_streams(self):
            return {}

    admin = make_token("admin")
    cameras = Cameras()
    context = ApiContext(
        cameras, None, EventFeed(), Asks(cameras), Access(parse_tokens(f"{admin} read admin", "t")), None, None,
        ApiConfig(),
    )  # fmt: skip
    routes = [route for route in api_routes(context) if getattr(route, "include_in_schema", False)]
    return {(method, route.path) for route in routes for method in route.methods - {"HEAD"}} | {("GET", OPENAPI_PATH)}


def test_the_routes_table_names_every_route_the_api_serves():
    documented = set()
    for row in table(DOCS / "api.md", "| route | scope | what |"):
        for entry in re.findall(r"`([A-Z]+) (/[^`?]*)[^`]*`", row[0]):
            documented.add(entry)
    served = served_routes()
    assert documented == served, {"in the docs only": documented - served, "served only": served - documented}
