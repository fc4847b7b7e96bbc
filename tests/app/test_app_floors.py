"""Inside app/ too, imports point one way: no module imports one that (through others) imports it back, counting
each sub-package (app/fleet/) as one floor. The config layer (app/config.py, app/flags.py, app/fleet_config.py)
sits below the fleet, which reads it. The watches and the HTTP API are rooms of their own below app/
(tests/project/test_import_layers.py)."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SUB_PACKAGES = ("fleet",)


def _floor(module: str) -> str:
    """app.fleet.host -> app.fleet; app.config -> app.config."""
    parts = module.split(".")
    return ".".join(parts[:2]) if len(parts) > 2 or parts[-1] in SUB_PACKAGES else module


def _app_modules() -> dict[str, Path]:
    found = {}
    for path in (ROOT / "app").rglob("*.py"):
        parts = path.relative_to(ROOT).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


MODULES = _app_modules()


def _imports(path: Path) -> set[str]:
    """The app modules `path` imports, late imports included (none of app/ is imported for type checking only)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return {name for name in found if name in MODULES}


def _floors() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for module, path in MODULES.items():
        here = _floor(module)
        graph.setdefault(here, set()).update(_floor(t) for t in _imports(path) if _floor(t) != here)
    return graph


def _reaches(graph: dict[str, set[str]], start: str) -> set[str]:
    seen, todo = set(), [start]
    while todo:
        for nxt in graph.get(todo.pop(), ()):
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return seen


def test_no_floor_of_the_app_imports_one_above_it():
    graph = _floors()
    circles = sorted(floor for floor in graph if floor in _reaches(graph, floor))
    assert not circles, f"floors of app/ that import themselves back: {circles}"


def test_the_config_layer_and_the_stream_stand_below_the_fleet_and_the_checks():
    graph = _floors()
    for low in ("app.config", "app.flags", "app.fleet_config", "app.config_flags"):
        assert "app.fleet" not in _reaches(graph, low), low
    assert "app.stream" in graph["app.watch_checks"] and "app.watch_checks" not in _reaches(graph, "app.stream")
    assert "app.fleet_config" in graph["app.fleet"] and "app.config" in graph["app.fleet"]
