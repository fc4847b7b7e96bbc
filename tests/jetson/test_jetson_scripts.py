"""The rest of jetson/: shellcheck on every script, the pure detection functions, the container route."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from app.cli import parse_args
from app.config import AppConfig
from edge_assistant import ROOMS

REPO = Path(__file__).resolve().parents[2]
JETSON = REPO / "jetson"
SCRIPTS = sorted([*JETSON.glob("*.sh"), *JETSON.glob("lib/*.sh")])


def require_tool(name: str) -> pytest.MarkDecorator:
    """Skip when `name` is missing, unless EDGE_ASSISTANT_REQUIRE_TOOLS=1 (CI): then the test fails."""
    missing = shutil.which(name) is None and os.environ.get("EDGE_ASSISTANT_REQUIRE_TOOLS") != "1"
    return pytest.mark.skipif(missing, reason=f"{name} not installed")


@require_tool("shellcheck")
def test_shellcheck_clean() -> None:
    assert len(SCRIPTS) >= 4
    result = subprocess.run(
        ["shellcheck", "-x", *map(str, SCRIPTS)], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stdout


def bash_fn(call: str, *files: tuple[str, str | bytes], tmp: Path | None = None) -> str:
    """Run one function of jetson/lib/detect.sh; `files` are written under tmp first."""
    for name, content in files:
        assert tmp is not None
        path = tmp / name
        path.write_bytes(content if isinstance(content, bytes) else content.encode())
    script = f"set -euo pipefail; source {shlex.quote(str(JETSON / 'lib/detect.sh'))}; {call}"
    return subprocess.run(["bash", "-c", script], capture_output=True, text=True, check=True, timeout=30).stdout


@pytest.mark.parametrize(
    ("first_line", "version"),
    [
        ("# R36 (release), REVISION: 4.3, GCID: 38968081, BOARD: generic, EABI: aarch64", "36.4.3"),
        ("# R36 (release), REVISION: 4.0, GCID: 37537400, BOARD: generic, EABI: aarch64", "36.4.0"),
        ("# R35 (release), REVISION: 6.1, GCID: 1, BOARD: t186ref, EABI: aarch64", "35.6.1"),
        ("garbage", ""),
    ],
)
def test_l4t_version(tmp_path: Path, first_line: str, version: str) -> None:
    release = first_line + "\n# KERNEL_VARIANT: oot\nTARGET_USERSPACE_LIB_DIR=nvidia\n"
    out = bash_fn(f"l4t_version {tmp_path}/nv_tegra_release", ("nv_tegra_release", release), tmp=tmp_path)
    assert out.strip() == version
    assert bash_fn(f"l4t_version {tmp_path}/missing").strip() == ""


@pytest.mark.parametrize(
    ("model", "compatible", "mem_mib", "board"),
    [
        ("NVIDIA Jetson AGX Orin Developer Kit", "", 62841, "agx-orin-64"),
        ("Jetson AGX Orin", "", 30536, "agx-orin-32"),
        ("NVIDIA Jetson Orin NX Engineering Reference Developer Kit", "", 15656, "orin-nx-16"),
        ("NVIDIA Jetson Orin Nano Engineering Reference Developer Kit Super", "", 7620, "orin-nano-8"),
        ("Some Carrier", "nvidia,p3768-0000+p3767-0003 nvidia,tegra234", 7620, "orin-nano-8"),
        ("Some Carrier", "nvidia,p3768-0000+p3767-0001 nvidia,tegra234", 7450, "orin-nx-8"),
        ("NVIDIA Jetson Xavier NX Developer Kit", "nvidia,p3668-0001 nvidia,tegra194", 7600, "unknown"),
    ],
)
def test_board_from_model_compatible_and_memory(model: str, compatible: str, mem_mib: int, board: str) -> None:
    call = f'board_id "$(board_family {shlex.quote(model)} {shlex.quote(compatible)})" {mem_mib}'
    assert bash_fn(call).strip() == board


def test_device_tree_strings_lose_their_nul_bytes(tmp_path: Path) -> None:
    compatible = b"nvidia,p3768-0000+p3767-0005\0nvidia,p3767-0005\0nvidia,tegra234\0"
    out = bash_fn(f"read_dt_string {tmp_path}/compatible", ("compatible", compatible), tmp=tmp_path)
    assert out == "nvidia,p3768-0000+p3767-0005 nvidia,p3767-0005 nvidia,tegra234\n"


# --- the container route ---------------------------------------------------------------------


def test_dockerfile_base_torch_source_and_contents() -> None:
    text = (JETSON / "Dockerfile").read_text()
    assert re.search(r"^ARG BASE_IMAGE=dustynv/pytorch:2\.\d+-r36\.4\.0-", text, flags=re.M)
    assert "FROM ${BASE_IMAGE}" in text
    assert "pypi.jetson-ai-lab.io/jp6/cu128" in text and "PIP_EXTRA_INDEX_URL= " in text
    assert "-c /opt/torch-constraint.txt" in text
    # Every room the project ships (edge_assistant.ROOMS, the one list) is copied into the image.
    assert "ui" in ROOMS and "bus" in ROOMS
    for top in ROOMS:
        assert re.search(rf"^COPY {top} {top}$", text, flags=re.M), top
    assert 'ENTRYPOINT ["/opt/venv/bin/python", "-m", "app"]' in text


def run_container(tmp: Path, *args: str) -> subprocess.CompletedProcess:
    etc, proc = tmp / "etc", tmp / "proc"
    (proc / "device-tree").mkdir(parents=True)
    etc.mkdir()
    (etc / "nv_tegra_release").write_text("# R36 (release), REVISION: 4.3, GCID: 38968081, BOARD: generic\n")
    (proc / "device-tree/model").write_bytes(b"NVIDIA Jetson Orin Nano Developer Kit\0")
    (proc / "meminfo").write_text("MemTotal:        7802676 kB\n")
    bin_dir = tmp / "bin"
    bin_dir.mkdir()
    (bin_dir / "docker").write_text(f'#!/bin/sh\necho "docker $*" >> "{tmp}/calls.log"\nexit 1\n')
    (bin_dir / "docker").chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    cmd = [str(JETSON / "run-container.sh"), "--etc-root", str(etc), "--proc-root", str(proc), *args]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=60)


def planned_docker_run(out: str) -> list[str]:
    line = next(x for x in out.splitlines() if x.startswith("would run: docker run "))
    return shlex.split(line.removeprefix("would run: "))


def test_container_run_command(tmp_path: Path) -> None:
    tegrastats = tmp_path / "tegrastats"
    tegrastats.write_text("#!/bin/sh\n")
    tegrastats.chmod(0o755)
    result = run_container(tmp_path, "--dry-run", "--source", "camera:1", "--tegrastats", str(tegrastats))
    assert result.returncode == 0, result.stderr
    assert not (tmp_path / "calls.log").exists()  # a dry run calls no docker at all
    argv = planned_docker_run(result.stdout)
    image = argv.index("edge-assistant:r36.4")
    docker, app = argv[:image], argv[image + 1 :]
    assert docker[docker.index("--runtime") + 1] == "nvidia"
    assert docker[docker.index("--device") + 1] == "/dev/video1"
    assert docker[docker.index("-p") + 1] == "127.0.0.1:7860:7860"
    assert f"{tegrastats}:/usr/bin/tegrastats:ro" in docker
    assert docker[docker.index("--restart") + 1] == "unless-stopped"
    assert app[app.index("--camera") + 1] == "1"
    assert app[app.index("--model") + 1] == "HuggingFaceTB/SmolVLM2-500M-Video-Instruct"  # orin-nano-8
    assert app[app.index("--budget") + 1] == "1024"
    assert "docker build -f" in result.stdout


def test_container_with_a_video_file_mounts_its_folder(tmp_path: Path) -> None:
    video = tmp_path / "clips" / "my walk.mp4"
    result = run_container(
        tmp_path, "--dry-run", "--source", str(video), "--expose", "--open", "--tegrastats", "/nonexistent"
    )
    argv = planned_docker_run(result.stdout)
    docker = argv[: argv.index("edge-assistant:r36.4")]
    assert f"{video.parent}:{video.parent}:ro" in docker
    assert argv[argv.index("--video") + 1] == str(video)
    assert "--device" not in docker  # no camera to pass through
    assert docker[docker.index("-p") + 1] == "7860:7860"  # --expose
    assert not any("tegrastats" in a for a in docker)


def test_container_expose_needs_a_login_or_open(tmp_path: Path) -> None:
    result = run_container(tmp_path, "--dry-run", "--expose")
    assert result.returncode == 2 and "--auth-file" in result.stderr and "--open" in result.stderr
    assert "would run" not in result.stdout and not (tmp_path / "calls.log").exists()


def test_container_expose_with_a_login_file_passes_it_in_the_environment(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.delenv("EDGE_ASSISTANT_AUTH", raising=False)
    login = tmp_path / "page-login"
    login.write_text("ann:s3cret pass\n")
    login.chmod(0o600)
    result = run_container(tmp_path, "--dry-run", "--expose", "--auth-file", str(login))
    assert result.returncode == 0, result.stderr
    assert "s3cret" not in result.stdout + result.stderr  # nowhere on a command line
    argv = planned_docker_run(result.stdout)
    docker, app = argv[: argv.index("edge-assistant:r36.4")], argv[argv.index("edge-assistant:r36.4") + 1 :]
    assert docker[docker.index("-e") + 1] == "EDGE_ASSISTANT_AUTH" and "--open" not in app
    assert app[app.index("--host") + 1] == "0.0.0.0" and "--allowed-host" in app
    config = AppConfig.from_args(parse_args(app))  # the app accepts every flag
    assert config.ui is not None and config.ui.beyond_loopback and config.ui.auth is None  # the login: from -e


@pytest.mark.parametrize("mode", [0o644, 0o640])
def test_container_refuses_a_login_file_others_can_read(tmp_path: Path, mode: int) -> None:
    login = tmp_path / "page-login"
    login.write_text("ann:pw\n")
    login.chmod(mode)
    result = run_container(tmp_path, "--dry-run", "--expose", "--auth-file", str(login))
    assert result.returncode == 2 and "chmod 600" in result.stderr


def test_container_open_says_so_and_the_app_runs_without_login(tmp_path: Path) -> None:
    result = run_container(tmp_path, "--dry-run", "--expose", "--open")
    assert result.returncode == 0, result.stderr
    assert "no login" in result.stdout
    app = planned_docker_run(result.stdout)
    app = app[app.index("edge-assistant:r36.4") + 1 :]
    assert "--open" in app and AppConfig.from_args(parse_args(app)).ui.no_login


def test_container_fake_roots_need_dry_run(tmp_path: Path) -> None:
    result = run_container(tmp_path)
    assert result.returncode == 2 and not (tmp_path / "calls.log").exists()
