"""`pip install .` ships the whole app, proved on the wheel a user would get.

The wheel is built from a copy of the tracked files (`git ls-files`: an in-tree build would reuse a stale
build/ folder), with `pip wheel --no-deps --no-build-isolation --no-index` (nothing downloaded). Then:
- the wheel installs one top-level name, `edge_assistant` (its `top_level.txt`), holding every module git tracks in
  the rooms (`edge_assistant.ROOMS`), the C++ sources of the CPU kernels and the demo model;
- it installs into a fresh virtual environment outside the checkout with `pip install --no-index` and *without*
  `--no-deps`: pip resolves every dependency the wheel declares (and theirs) against what that environment sees
  and installs nothing but the wheel. The fresh environment sees the project's environment through one `.pth`
  line (its site-packages), so torch and the rest are neither downloaded nor copied; pip config files are off,
  so no local wheel folder could fill a missing dependency in. A dependency the wheel declares that is not
  there, or a version that does not match, fails the install;
- run from a folder outside the checkout, with no PYTHONPATH, the installed `edge-assistant` command answers
  `--help` and `history --help`; a plain interpreter imports no room (`app`, `cache`, `model`, ...) until it has
  imported `edge_assistant`, and then the installed copy; `python -m edge_assistant` is the command too; a
  short `--model tiny` run watches a
  generated video, answers, writes its timeline (`timeline`) and builds the CPU kernels from the wheel's C++
  sources (where the CPU has AVX2).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import sysconfig
import venv
import zipfile
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch

from edge_assistant import ROOMS

REPO = Path(__file__).resolve().parents[2]
PACKAGE = "edge_assistant"  # the one installed name
DIST = "edge-stream-assistant"


@dataclass(frozen=True)
class Installed:
    wheel: Path
    venv: Path  # the fresh virtual environment
    pip_output: str  # what `pip install` printed
    home: Path  # a folder outside the checkout, the working folder of every run

    @property
    def command(self) -> Path:
        return self.venv / "bin" / "edge-assistant"

    @property
    def python(self) -> Path:
        return self.venv / "bin" / "python"


def _clean_env(**extra: str) -> dict[str, str]:
    """The environment of every subprocess here: no PYTHONPATH or virtual environment leaking the checkout in,
    no pip configuration (a configured local wheel folder would satisfy what the wheel fails to declare)."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    env = {k: v for k, v in env.items() if not k.startswith("PIP_")}
    return {**env, "PIP_CONFIG_FILE": os.devnull, "PIP_DISABLE_PIP_VERSION_CHECK": "1", **extra}


def _run(args: list[str | Path], cwd: Path, timeout: float, **extra_env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(a) for a in args], cwd=cwd, env=_clean_env(**extra_env), capture_output=True, text=True, timeout=timeout
    )


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Installed:
    """The wheel built from a copy of the tracked files and installed into a fresh venv (see the module)."""
    root = tmp_path_factory.mktemp("install")
    assert not root.resolve().is_relative_to(REPO), "the install must happen outside the checkout"
    source = root / "source"
    tracked = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True).stdout
    for name in filter(None, tracked.decode().split("\0")):
        if (REPO / name).is_file():
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, source / name)
    wheels = root / "wheels"
    built = _run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "--no-index",
                  "-w", wheels, source], cwd=root, timeout=300)  # fmt: skip
    assert built.returncode == 0, built.stdout[-2000:] + built.stderr[-2000:]
    (wheel,) = wheels.glob("edge_stream_assistant-*.whl")

    fresh = root / "venv"
    # no pip of its own: the project environment's pip, seen through the .pth, installs into this one
    venv.EnvBuilder(with_pip=False, symlinks=True).create(fresh)
    fresh_python = fresh / "bin" / "python"
    fresh_site = _run([fresh_python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                      cwd=root, timeout=60).stdout.strip()  # fmt: skip
    project = dict.fromkeys(sysconfig.get_paths()[key] for key in ("purelib", "platlib"))  # ordered, no repeats
    (Path(fresh_site) / "project-dependencies.pth").write_text("".join(f"{p}\n" for p in project))
    done = _run([fresh_python, "-m", "pip", "install", "--no-index", wheel], cwd=root, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return Installed(wheel, fresh, done.stdout, root)


def _tracked_modules() -> set[str]:
    """The tracked modules and kernel sources of the rooms and of edge_assistant/, as the wheel names them."""
    out = subprocess.run(["git", "ls-files", PACKAGE, *ROOMS], cwd=REPO, capture_output=True, text=True, check=True)
    names = [line for line in out.stdout.splitlines() if line.endswith((".py", ".cpp", ".h"))]
    return {name if name.startswith(f"{PACKAGE}/") else f"{PACKAGE}/{name}" for name in names}


def test_the_wheel_holds_every_tracked_module_and_the_kernel_sources(installed):
    names = set(zipfile.ZipFile(installed.wheel).namelist())
    missing = sorted(_tracked_modules() - names)
    assert not missing, f"the wheel leaves out: {missing}"
    csrc = f"{PACKAGE}/cache/cpu/csrc/"
    sources = {n for n in names if n.startswith(csrc)}
    assert {f"{csrc}bindings.cpp", f"{csrc}decode_attention.cpp"} <= sources, sorted(sources)
    assert any(n.endswith(".h") for n in sources), sorted(sources)
    demo = {n.removeprefix(f"{PACKAGE}/model/demo_model/") for n in names if "/model/demo_model/" in n}
    assert {"config.json", "model.safetensors", "tokenizer.json", "preprocessor_config.json"} <= demo, sorted(demo)
    tops = {n.split("/", 1)[0] for n in names if not n.split("/", 1)[0].endswith(".dist-info")}
    assert tops == {PACKAGE}, sorted(tops)  # nothing else lands in site-packages
    (top_level,) = [n for n in names if n.endswith(".dist-info/top_level.txt")]
    assert zipfile.ZipFile(installed.wheel).read(top_level).decode().split() == [PACKAGE]


def test_the_install_resolved_the_declared_dependencies_and_added_only_the_wheel(installed):
    (dist_info,) = (installed.venv / "lib").glob("python3*/site-packages/edge_stream_assistant-*.dist-info")
    requires = [line.split(":", 1)[1].strip() for line in (dist_info / "METADATA").read_text().splitlines()
                if line.startswith("Requires-Dist:")]  # fmt: skip
    names = {re.split(r"[ ;<>=!~\[(]", req, maxsplit=1)[0].lower() for req in requires}
    for needed in ("torch", "transformers", "gradio", "av", "numpy", "paho-mqtt", "psutil", "psycopg", "ninja"):
        assert needed in names, f"{needed} is not a declared dependency: {sorted(names)}"
    satisfied = {
        m.group(1).lower()
        for m in re.finditer(r"^Requirement already satisfied: ([A-Za-z0-9_.-]+)", installed.pip_output, re.M)
    }
    assert {"torch", "transformers", "gradio"} <= satisfied, installed.pip_output[-3000:]
    (line,) = [line for line in installed.pip_output.splitlines() if line.startswith("Successfully installed")]
    assert re.fullmatch(rf"Successfully installed {DIST}-[0-9.]+", line.strip()), line


def test_the_installed_command_runs_outside_the_checkout(installed):
    helped = _run([installed.command, "--help"], cwd=installed.home, timeout=120)
    assert helped.returncode == 0, helped.stderr[-2000:]
    assert "--budget" in helped.stdout and "--timeline" in helped.stdout
    history = _run([installed.command, "history", "--help"], cwd=installed.home, timeout=120)
    assert history.returncode == 0, history.stderr[-2000:]
    for room in ("app", "cache", "model"):  # a plain interpreter: no generic name of ours
        plain = _run([installed.python, "-c", f"import {room}"], cwd=installed.home, timeout=60)
        assert plain.returncode != 0 and "ModuleNotFoundError" in plain.stderr, (room, plain.stderr[-500:])
    code = (
        "import edge_assistant, app, timeline, cache.cpu.kernels as k; "
        "print(edge_assistant.__file__); print(app.__file__); print(k.SOURCES[0])"
    )
    where = _run([installed.python, "-c", code], cwd=installed.home, timeout=120)
    assert where.returncode == 0, where.stderr[-2000:]
    as_module = _run([installed.python, "-m", PACKAGE, "history", "--help"], cwd=installed.home, timeout=120)
    assert as_module.returncode == 0 and as_module.stdout == history.stdout, as_module.stderr[-2000:]
    for path in map(Path, where.stdout.split()):  # the installed copy ran, not the checkout
        assert path.is_relative_to(installed.venv) and not path.resolve().is_relative_to(REPO), path
        assert path.is_file(), path


def test_the_installed_command_watches_a_video_with_the_tiny_model(installed):
    from tests.support.app_helpers import video

    log, timeline, data = (installed.home / name for name in ("events.jsonl", "timeline.sqlite", "data"))
    done = _run(
        [installed.command, "--video", video(4), "--model", "tiny", "--no-realtime", "--every", "2", "--max-rounds",
         "1", "--budget", "256", "--window", "16", "--max-new-tokens", "4", "--quiet", "--timeline", timeline,
         "--log-jsonl", log],
        cwd=installed.home,
        timeout=300,  # the first run builds the CPU kernels (tens of seconds)
        EDGE_ASSISTANT_DATA=str(data),
        EDGE_ASSISTANT_KERNEL_CACHE=str(data / "kernels"),  # built here, not in the machine's cache
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    types = [json.loads(line)["type"] for line in log.read_text().splitlines()]
    assert "clip" in types and "answer" in types
    with closing(sqlite3.connect(timeline)) as conn:
        kinds = [row[0] for row in conn.execute("SELECT kind FROM moments")]
    assert "answer" in kinds, kinds
    if torch.backends.cpu.get_cpu_capability() in ("AVX2", "AVX512"):  # built from the wheel's C++ sources
        assert "CPU kernels on" in done.stderr, done.stderr[-2000:]
        assert list((data / "kernels").glob("*/*.so")), "no kernel library was built"


RAY_WORKER = """
import edge_assistant, ray
from fleet.cluster import worker_setup
# address="local": a new instance of its own, never the test cluster another pytest-xdist worker may be running
ray.init(address="local", num_cpus=1, include_dashboard=False, log_to_driver=False, runtime_env=worker_setup())

@ray.remote
def rooms():
    import app, fleet.host_actor
    return app.__file__

print(ray.get(rooms.remote(), timeout=120))
ray.shutdown()
"""


def test_a_ray_worker_of_the_installed_program_imports_the_rooms(installed):
    """A fleet's host runs in a Ray worker, which never ran `edge_assistant`'s import: the driver's runtime
    environment has it run first (fleet.cluster.worker_setup), so the worker imports the rooms as the driver does.
    Once, on a local Ray instance of one CPU (seconds), with the installed copy."""
    done = _run([installed.python, "-c", RAY_WORKER], cwd=installed.home, timeout=300, RAY_USAGE_STATS_ENABLED="0")
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    path = Path(done.stdout.split()[-1])
    assert path.is_relative_to(installed.venv) and path.name == "__init__.py", done.stdout
