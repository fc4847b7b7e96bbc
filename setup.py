"""The wheel: one top-level package, `edge_assistant`, holding the rooms (edge_assistant/__init__.py's ROOMS) that
the repository keeps beside it. Everything else about the project is in pyproject.toml."""

import ast
from pathlib import Path

from setuptools import find_packages, setup

HERE = Path(__file__).resolve().parent


def rooms() -> tuple[str, ...]:
    """ROOMS, read from edge_assistant/__init__.py without importing it."""
    tree = ast.parse((HERE / "edge_assistant" / "__init__.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "ROOMS" for t in node.targets):
            return tuple(ast.literal_eval(node.value))
    raise RuntimeError("edge_assistant/__init__.py has no ROOMS")


ROOMS = rooms()
packages = ["edge_assistant"] + [
    f"edge_assistant.{package}" for package in find_packages(include=[*ROOMS, *(f"{room}.*" for room in ROOMS)])
]
setup(
    packages=packages,
    package_dir={f"edge_assistant.{room}": room for room in ROOMS},
    package_data={
        "edge_assistant.cache.cpu": ["csrc/*.cpp", "csrc/*.h"],  # the CPU kernels' sources, built at first use
        "edge_assistant.model": ["demo_model/*"],  # the demo model's checkpoint (model/demo.py, --model demo)
    },
)
