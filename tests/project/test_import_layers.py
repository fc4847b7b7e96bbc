"""Imports point one way: `fleet -> app -> api, terminal -> watches, ui, outputs, timeline, capture, model -> cache`.
The fleet is the top room (many one-box assistants, coordinated); only the program's root, `app/__main__.py`,
imports it (it picks one box or the fleet from the command line). Every room but cache/ may stand on `bus/` (the
typed events, their records, the event bus, the drop-oldest queue, stream-time clocks), which stands on nothing;
inside `cache/` the two rooms below tier 1 (`cache/store/`, `cache/cpu/`) never reach back up into the cache, its
layers, the runner or the decode step.

Read from the source with `ast`, so a late import inside a function counts as much as one at the top. Imports
under `if TYPE_CHECKING:` are left out: they name a type for the reader and never run.
"""

import ast
import sys
from pathlib import Path

from edge_assistant import ROOMS
from tests.support.fresh_imports import loaded_after_imports

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = (*ROOMS, "quality")  # the installed rooms (edge_assistant.ROOMS, the one list) and the benchmarks' own
ALLOWED = {  # package -> the project's packages it may import
    "fleet": {"app", "api", "terminal", "watches", "ui", "outputs", "timeline", "capture", "model", "cache", "bus",
              "monitor"},  # fmt: skip
    "app": {"api", "terminal", "watches", "ui", "outputs", "timeline", "capture", "model", "cache", "quality", "bus",
            "monitor"},  # fmt: skip
    "api": {"watches", "ui", "capture", "timeline", "bus"},  # the HTTP API: routes over the assistant's protocol
    "terminal": {"ui", "watches", "timeline", "bus"},  # the terminal's parts: stdin, watch commands, printer, history
    "watches": {"timeline", "bus"},  # yes/no watches, the standing question, runtime watches and their state file
    "outputs": {"timeline", "bus"},  # every sink and the publisher; the today sensors and digests read the timeline
    "timeline": {"bus"},  # tier 3: SQLite or PostgreSQL
    "ui": {"capture", "model", "cache", "bus"},
    "capture": {"bus"},
    "model": {"cache", "bus"},  # the statistics a session makes are the events' types (bus.stats)
    "cache": set(),
    "quality": {"capture", "model", "cache"},  # quality/video_*: generated scenes and their ground truth
    "bus": set(),  # the bottom floor
    "monitor": set(),  # memory readings: a room of their own
}
PROGRAM_ROOT = "app.__main__"  # `python -m app`: stands above every room, the fleet included
TIER_ONE = {"cache.bounded_cache", "cache.static_layer", "cache.runner", "cache.decode"}  # the cache and its driving


def _modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            parts = path.relative_to(ROOT).with_suffix("").parts
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


MODULES = _modules()


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(path: Path) -> set[str]:
    """The project modules `path` imports at run time (`from a import b` counts as a.b when b is a module)."""
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(path.read_text()))
    return {name for name in found if name in MODULES}


IMPORTS = {module: _imports(path) for module, path in MODULES.items()}


def test_packages_import_only_the_layers_below_them():
    wrong = [
        f"{module} imports {target}"
        for module, targets in IMPORTS.items()
        for target in targets
        if (home := module.split(".")[0]) != (other := target.split(".")[0])
        and other not in ALLOWED[home]
        and module != PROGRAM_ROOT
    ]
    assert not wrong, "imports against the layer order:\n" + "\n".join(sorted(wrong))


def test_outputs_and_timeline_take_nothing_from_capture():
    """The outputs and the timeline get their queue and their events from `bus/`, not from the capture room."""
    wrong = [
        f"{module} imports {target}"
        for module, targets in IMPORTS.items()
        if module.startswith(("outputs", "timeline"))
        for target in targets
        if target.split(".")[0] == "capture"
    ]
    assert not wrong, "\n".join(sorted(wrong))
    # the names this test checks exist, and take from bus/ what they took from capture/ before
    for module in ("outputs.publisher", "outputs.webhook", "timeline.writer"):
        assert any(target.split(".")[0] == "bus" for target in IMPORTS[module]), module


def test_memory_readings_live_in_monitor_only():
    """The memory monitor left ui/ (only app/, fleet/, jetson/ and scripts/ use it): nothing is left of it there."""
    assert "monitor.memory_monitor" in MODULES and "monitor.backends.nvml" in MODULES
    assert not [name for name in MODULES if name.startswith(("ui.memory_monitor", "ui.memory_backends"))]
    users = [module for module, targets in IMPORTS.items() if "monitor.memory_monitor" in targets]
    assert users and all(module.split(".")[0] in ("app", "fleet", "monitor") for module in users), users


def test_the_terminal_takes_capture_options_from_capture_not_from_the_page():
    assert "capture.options" in IMPORTS["app.terminal"] and "ui.controls" not in IMPORTS["app.terminal"]


def test_the_store_and_the_cpu_kernels_never_import_tier_one():
    wrong = []
    for module, targets in IMPORTS.items():
        if module.startswith("cache.store"):
            wrong += [f"{module} imports {t}" for t in targets if t in TIER_ONE or t == "cache.policies"]
        elif module.startswith("cache.cpu"):  # the kernels stand alone: nothing of cache/ outside cache/cpu/
            wrong += [f"{module} imports {t}" for t in targets if not t.startswith("cache.cpu")]
    assert not wrong, "\n".join(sorted(wrong))
    # the names this test checks exist (after a rename it would pass without checking anything)
    assert all(name in MODULES for name in (*TIER_ONE, "cache.store.recall", "cache.cpu.kernels"))
    assert "cache.layer" in IMPORTS["cache.store.recall"]  # the one tier-1 helper recall uses: gather_tokens


def test_no_two_modules_import_each_other():
    circles = {
        tuple(sorted((a, b)))
        for a, targets in IMPORTS.items()
        for b in targets
        if a != b
        and a in IMPORTS.get(b, set())
        # a package's registry (__init__) importing its members, which import a sibling, is not a circle
        and not (MODULES[a].name == "__init__.py" or MODULES[b].name == "__init__.py")
    }
    assert not circles, f"modules that import each other: {sorted(circles)}"


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one node: every import circle, whatever its length."""
    order: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        order[node] = low[node] = len(order)
        stack.append(node)
        for target in graph.get(node, ()):
            if target not in order:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], order[target])
        if low[node] == order[node]:
            group = []
            while True:
                member = stack.pop()
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for node in sorted(graph):
        if node not in order:
            visit(node)
    return found


def test_no_import_circle_of_any_length():
    """No chain of imports comes back to where it started, a package's `__init__` included (a member imports
    its siblings as `import pkg.sibling as name`, never `from pkg import sibling`, which runs the `__init__`)."""
    assert not _circles(IMPORTS), _circles(IMPORTS)
    assert _circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]  # the finder finds


def test_the_reader_sees_each_kind_of_import(tmp_path):
    """The parser itself: a late import counts, a TYPE_CHECKING one does not, `from pkg import module` resolves."""
    source = tmp_path / "example.py"
    source.write_text(
        "import cache.rope\n"
        "from cache.cpu import kernels\n"
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    from cache.runner import CachedRunner\n"
        "def late():\n"
        "    from cache.decode import StaticDecoder\n"
    )
    assert _imports(source) == {"cache.rope", "cache.cpu", "cache.cpu.kernels", "cache.decode"}


def _third_party(path: Path) -> set[str]:
    """Top-level names of every module `path` imports (late imports included)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module.split(".")[0])
    return found


def test_only_the_fleet_imports_ray_and_only_when_it_runs():
    """Ray is the fleet's (fleet/); without --ray it is never imported: not by the CLI, the config, the
    terminal, the page, nor by the fleet's modules themselves until they join a cluster."""
    users = sorted(module for module, path in MODULES.items() if "ray" in _third_party(path))
    assert users and all(module.startswith("fleet.") for module in users), users
    _, everything = loaded_after_imports()  # in a fresh interpreter: what it imported
    assert everything["ray"] is False


def test_only_the_program_root_imports_the_fleet():
    """The fleet stands on app/: no room below it reaches up to it, and `python -m app` (the root) is the one way in."""
    users = sorted(module for module, targets in IMPORTS.items() if any(t.split(".")[0] == "fleet" for t in targets))
    assert [m for m in users if not m.startswith("fleet")] == [PROGRAM_ROOT], users


NOT_SHIPPED = {"quality", "scripts", "tests"}  # the benchmarks' measures, the scripts, the suite


def test_every_package_folder_is_a_room_or_named_as_not_shipped():
    folders = {path.parent.name for path in ROOT.glob("*/__init__.py")} - {"edge_assistant"}
    assert folders == set(ROOMS) | (NOT_SHIPPED & folders), sorted(folders ^ set(ROOMS))


def test_the_installed_name_imports_no_room_when_imported():
    """edge_assistant/__init__.py runs first in every process of the installed program (and Ray's workers): the
    standard library only, so that importing it costs nothing and can never fail on a room."""
    tree = ast.parse((ROOT / "edge_assistant" / "__init__.py").read_text())
    nodes = list(ast.walk(tree))
    names = {alias.name.split(".")[0] for node in nodes if isinstance(node, ast.Import) for alias in node.names}
    names |= {node.module.split(".")[0] for node in nodes if isinstance(node, ast.ImportFrom) and node.module}
    assert names and not names & (set(ROOMS) | NOT_SHIPPED), names
    assert names <= set(sys.stdlib_module_names) | {"__future__"}, names
