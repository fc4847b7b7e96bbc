"""The docs' tables that come from a registry, written from it, so that none goes stale.

    python scripts/docs_tables.py            # rewrites each generated table in docs/ (between its two markers)
    python scripts/docs_tables.py --check    # exit 1 naming the tables that differ (tests/project/test_docs_tables.py)

A generated table sits between `<!-- generated: NAME (scripts/docs_tables.py) -->` and `<!-- end: NAME -->`.
Today: `outputs` in docs/alerts.md, from `outputs.registry` (each output's name, the flag that turns it on, the
events it acts on, where it runs in a fleet, its file). The tables of policies (docs/cache.md) and of API routes
(docs/api.md) carry hand-written explanations: the test checks them against `cache.policies.POLICIES` and the
API's routes instead.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))  # run as a script from anywhere


def outputs_table() -> str:
    """The registered outputs as a Markdown table (registration order)."""
    import outputs  # noqa: F401  (registers every output)
    from app.config_flags import flag_of
    from outputs.registry import output_kinds

    rows = ["| output | turned on by | acts on | in a fleet | file |", "| --- | --- | --- | --- | --- |"]
    for kind in output_kinds():
        switch = kind.settings_class.__dataclass_fields__[kind.switch]
        flag = f"`{flag_of(switch)}`" + (" (one per value, repeatable)" if switch.metadata.get("repeat") else "")
        wants = ", ".join(f"`{getattr(event, 'TYPE', event.__name__)}`" for event in kind.wants)
        where = "on the head, once" if kind.head_only else "on every host"
        path = kind.sink.__module__.replace(".", "/") + ".py"
        rows.append(f"| `{kind.name}` | {flag} | {wants} | {where} | `{path}` |")
    return "\n".join(rows)


TABLES: dict[str, tuple[Path, Callable[[], str]]] = {
    "outputs": (REPO / "docs" / "alerts.md", outputs_table),
}


def block(name: str) -> re.Pattern:
    return re.compile(
        rf"(<!-- generated: {name} \(scripts/docs_tables\.py\) -->\n)(.*?)\n?(<!-- end: {name} -->)", re.DOTALL
    )


def current(name: str) -> str | None:
    """The table as the docs hold it now; None when its markers are missing."""
    path, _ = TABLES[name]
    found = block(name).search(path.read_text())
    return None if found is None else found.group(2)


def stale() -> list[str]:
    """The names of the tables whose docs differ from their registry (or lack their markers)."""
    return [name for name, (_, make) in TABLES.items() if current(name) != make()]


def write() -> list[str]:
    """Rewrites every stale table in place; returns their names. ValueError for a table without its markers."""
    changed = []
    for name in stale():
        path, make = TABLES[name]
        text = path.read_text()
        if not block(name).search(text):
            raise ValueError(f"{path}: no markers for the {name} table (<!-- generated: {name} ... -->)")
        fresh = make()
        path.write_text(block(name).sub(lambda m, fresh=fresh: m.group(1) + fresh + "\n" + m.group(3), text))
        changed.append(name)
    return changed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="only say which tables differ (exit 1 if any)")
    args = parser.parse_args(argv)
    if args.check:
        names = stale()
        for name in names:
            print(f"{TABLES[name][0].relative_to(REPO)}: the {name} table differs from its registry", file=sys.stderr)
        if names:
            print("run: python scripts/docs_tables.py", file=sys.stderr)
        return 1 if names else 0
    for name in write():
        print(f"wrote the {name} table in {TABLES[name][0].relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
