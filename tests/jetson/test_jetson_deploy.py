"""jetson/deploy.sh against fake Jetson boards (fake /etc and /proc trees) and a non-Jetson machine.

Dry runs: the detected board, torch source and per-board defaults must match jetson/README.md, the
planned steps must be the documented ones, nothing that changes the system may be called, and the
unit file must pass `systemd-analyze verify`. Sandbox runs (every system tool a stub inside a temp
directory): a first install does the work, a second one changes nothing, uninstall undoes it.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "jetson" / "deploy.sh"
JP6_INDEX = "https://pypi.jetson-ai-lab.io/jp6/cu126"


def require_tool(name: str) -> pytest.MarkDecorator:
    """Skip when `name` is missing, unless EDGE_ASSISTANT_REQUIRE_TOOLS=1 (CI): then the test fails."""
    missing = shutil.which(name) is None and os.environ.get("EDGE_ASSISTANT_REQUIRE_TOOLS") != "1"
    return pytest.mark.skipif(missing, reason=f"{name} not installed")


pytestmark = pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")


@dataclass(frozen=True)
class Board:
    release: str | None  # first line of /etc/nv_tegra_release
    model: str | None  # /proc/device-tree/model
    compatible: str | None
    mem_kib: int


R36_4 = "# R36 (release), REVISION: 4.3, GCID: 38968081, BOARD: generic, EABI: aarch64, DATE: Wed Jan  8 2025"


def orin(model: str, module: str, mem_kib: int) -> Board:
    carrier = "p3737-0000" if module.startswith("p3701") else "p3768-0000"
    return Board(R36_4, model, f"nvidia,{carrier}+{module} nvidia,{module} nvidia,tegra234", mem_kib)


DEVKIT = "NVIDIA Jetson {} Developer Kit"
BOARDS = {
    "agx-orin-64": orin(DEVKIT.format("AGX Orin"), "p3701-0005", 64_335_600),
    "agx-orin-32": orin(DEVKIT.format("AGX Orin"), "p3701-0004", 31_268_000),
    "orin-nx-16": orin(DEVKIT.format("Orin NX Engineering Reference"), "p3767-0000", 16_032_000),
    "orin-nano-8": orin(DEVKIT.format("Orin Nano"), "p3767-0005", 7_802_676),
    "orin-nano-4": orin(DEVKIT.format("Orin Nano Engineering Reference"), "p3767-0004", 3_560_000),
}
DESKTOP = Board(None, None, None, 32_000_000)
NVPMODEL_CONF = "\n".join(
    [
        "< POWER_MODEL ID=0 NAME=MAXN >",
        "CPU_ONLINE CORE_0 1",
        "",
        "< POWER_MODEL ID=1 NAME=15W >",
        "CPU_ONLINE CORE_0 1",
    ]
)


def make_root(tmp: Path, board: Board) -> tuple[Path, Path]:
    etc, proc = tmp / "etc", tmp / "proc"
    (proc / "device-tree").mkdir(parents=True)
    etc.mkdir()
    if board.release is not None:
        (etc / "nv_tegra_release").write_text(board.release + "\n# KERNEL_VARIANT: oot\n")
        (etc / "nvpmodel.conf").write_text(NVPMODEL_CONF)
    if board.model is not None:
        (proc / "device-tree/model").write_bytes(board.model.encode() + b"\0")
    if board.compatible is not None:
        (proc / "device-tree/compatible").write_bytes(b"\0".join(c.encode() for c in board.compatible.split()) + b"\0")
    (proc / "meminfo").write_text(f"MemTotal:       {board.mem_kib} kB\nMemAvailable:   {board.mem_kib // 2} kB\n")
    return etc, proc


def stub_tools(bin_dir: Path, log: Path) -> None:
    """Every system tool deploy.sh might call, as a stub that records its call and says "not done"."""
    bin_dir.mkdir(parents=True)
    tools = ("apt-get", "dpkg-query", "systemctl", "nvpmodel", "python3", "pip", "sudo", "jetson_clocks")
    for tool in tools:
        path = bin_dir / tool
        path.write_text(f'#!/bin/sh\necho "{tool} $*" >> "{log}"\nexit 1\n')
        path.chmod(path.stat().st_mode | stat.S_IXUSR)


def run_deploy(tmp: Path, board: Board, *args: str, dry_run: bool = True) -> subprocess.CompletedProcess:
    etc, proc = make_root(tmp / "root", board)
    log = tmp / "calls.log"
    stub_tools(tmp / "bin", log)
    env = {**os.environ, "PATH": f"{tmp / 'bin'}{os.pathsep}{os.environ['PATH']}"}
    env.pop("SUDO_USER", None)
    cmd = [str(DEPLOY), "--etc-root", str(etc), "--proc-root", str(proc), "--prefix", str(tmp / "opt"),
           "--systemd-dir", str(tmp / "systemd"), *args]  # fmt: skip
    if dry_run:
        cmd.insert(1, "--dry-run")
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=60)


def plan_values(out: str) -> dict[str, str]:
    return dict(re.findall(r"^    (\w+)=(.*)$", out, flags=re.M))


def documented_defaults() -> dict[str, dict[str, str]]:
    """The per-board table of jetson/README.md, between its board-defaults markers."""
    text = (REPO / "jetson" / "README.md").read_text()
    table = text.split("<!-- board-defaults:begin -->")[1].split("<!-- board-defaults:end -->")[0]
    rows = [[c.strip().strip("`") for c in line.strip().strip("|").split("|")] for line in table.splitlines()]
    rows = [r for r in rows if len(r) > 1 and not set(r[0]) <= set("-: ")]
    header, body = rows[0], rows[1:]
    assert header[:1] == ["board"]
    return {r[0]: dict(zip(header, r, strict=True)) for r in body}


# --- dry runs ---------------------------------------------------------------------------------


@pytest.mark.parametrize("board_id", sorted(BOARDS))
def test_dry_run_plan_matches_the_readme(tmp_path: Path, board_id: str) -> None:
    result = run_deploy(tmp_path, BOARDS[board_id])
    assert result.returncode == 0, result.stderr
    values = plan_values(result.stdout)
    doc = documented_defaults()[board_id]
    assert values["board"] == board_id
    assert values["l4t"] == "36.4.3"
    assert values["torch_index"] == JP6_INDEX
    assert values["torch_spec"] == "torch==2.8.0"
    for key in ("model", "budget", "fps", "dtype"):
        assert values[key] == doc[key], key
    # ... and the unit file passes them to the app.
    exec_start = re.search(r"^    \| ExecStart=(.*)$", result.stdout, flags=re.M)[1]
    for flag in ("model", "budget", "fps", "dtype"):
        assert f"--{flag} {doc[flag]} " in exec_start


def test_dry_run_steps_and_commands(tmp_path: Path) -> None:
    result = run_deploy(tmp_path, BOARDS["orin-nano-8"])
    out = result.stdout
    assert out.startswith("DRY RUN: nothing will be changed.")
    steps = re.findall(r"^==> \[\d\] (.*)$", out, flags=re.M)
    assert [s.split(" ")[0] for s in steps] == [
        "Detect",
        "System",
        "Virtual",
        "CUDA-enabled",
        "Project",
        "Check",
        "Power",
        "systemd",
    ]
    planned = re.findall(r"^    would (?:run|write): (.*)$", out, flags=re.M)
    venv = tmp_path / "opt" / "venv"
    assert any(p.startswith("apt-get install -y --no-install-recommends") and "nvidia-jetpack" in p for p in planned)
    assert f"python3 -m venv {venv}" in planned
    assert f"{venv}/bin/python -m pip install --index-url {JP6_INDEX} torch==2.8.0" in planned
    assert not any("--extra-index-url" in p or "download.pytorch.org" in p for p in planned)
    assert f"{venv}/bin/python -m pip install -r {REPO}/requirements.txt -c {venv}/torch-constraint.txt" in planned
    assert f"{tmp_path}/systemd/edge-assistant.service" in planned
    assert planned[-2:] == ["systemctl enable edge-assistant", "systemctl restart edge-assistant"]


def test_dry_run_changes_nothing(tmp_path: Path) -> None:
    result = run_deploy(tmp_path, BOARDS["agx-orin-64"], "--power-mode", "MAXN", "--jetson-clocks")
    assert result.returncode == 0, result.stderr
    calls = (tmp_path / "calls.log").read_text().splitlines() if (tmp_path / "calls.log").exists() else []
    # Only read-only queries reached the (stub) system tools.
    for call in calls:
        assert re.match(r"(dpkg-query -W|systemctl is-(enabled|active)|nvpmodel -q)\b", call), call
    assert not (tmp_path / "opt").exists() and not (tmp_path / "systemd").exists()
    assert "would run: nvpmodel -m 0" in result.stdout
    assert "ExecStartPre=+/usr/bin/jetson_clocks" in result.stdout


def unit_from(out: str) -> str:
    return "".join(line[6:] + "\n" for line in out.splitlines() if line.startswith("    | "))


@require_tool("systemd-analyze")
@pytest.mark.parametrize(
    "mode_args",
    [(), ("--mode", "terminal", "--source", "/data/my video.mp4", "--question", "What changed? 100%")],
)
def test_unit_file_passes_systemd_analyze_verify(tmp_path: Path, mode_args: tuple[str, ...]) -> None:
    result = run_deploy(tmp_path, BOARDS["orin-nx-16"], "--user", "root", *mode_args)
    assert result.returncode == 0, result.stderr
    python = tmp_path / "opt/venv/bin/python"  # what ExecStart names must exist for verify
    python.parent.mkdir(parents=True)
    python.write_text("#!/bin/sh\n")
    python.chmod(0o755)
    unit = tmp_path / "edge-assistant.service"
    unit.write_text(unit_from(result.stdout))
    verify = subprocess.run(["systemd-analyze", "verify", str(unit)], capture_output=True, text=True, timeout=60)
    assert verify.returncode == 0, verify.stderr
    # verify exits 0 on settings it ignores ("Failed to parse ..., ignoring"): none may name our unit.
    assert unit.name not in verify.stderr, verify.stderr
    if mode_args:
        assert '--video "/data/my video.mp4"' in unit.read_text()
        assert '--question "What changed? 100%%"' in unit.read_text()  # % is a systemd specifier
        assert "--ui" not in unit.read_text()


def test_non_jetson_is_refused(tmp_path: Path) -> None:
    result = run_deploy(tmp_path, DESKTOP)
    assert result.returncode == 3
    assert "not an NVIDIA Jetson" in result.stderr and "pip install -r requirements.txt" in result.stderr
    assert "==> [2]" not in result.stdout


def test_non_jetson_with_force_plans_for_the_given_board(tmp_path: Path) -> None:
    result = run_deploy(tmp_path, DESKTOP, "--force", "--board", "orin-nano-8")
    assert result.returncode == 3 and "no known CUDA torch source" in result.stderr
    result = run_deploy(
        tmp_path / "2",
        DESKTOP,
        "--force",
        "--board",
        "orin-nano-8",
        "--torch-index",
        JP6_INDEX,
        "--torch-spec",
        "torch==2.8.0",
    )
    assert result.returncode == 0, result.stderr
    assert plan_values(result.stdout)["model"] == documented_defaults()["orin-nano-8"]["model"]


@pytest.mark.parametrize(
    ("release", "reason"),
    [
        ("# R35 (release), REVISION: 4.1, GCID: 33958178, BOARD: t186ref, EABI: aarch64", "JetPack 5"),
        ("# R36 (release), REVISION: 3.0, GCID: 36923193, BOARD: generic, EABI: aarch64", "JetPack 6.0"),
        ("# R38 (release), REVISION: 2.0, GCID: 1, BOARD: generic", "not a release this script knows"),
    ],
)
def test_unsupported_l4t_is_refused_unless_forced(tmp_path: Path, release: str, reason: str) -> None:
    board = Board(release, "NVIDIA Jetson AGX Orin Developer Kit", None, 31_268_000)
    result = run_deploy(tmp_path, board)
    assert result.returncode == 3 and reason in result.stderr
    forced = run_deploy(
        tmp_path / "f",
        board,
        "--force",
        "--torch-index",
        "https://example.invalid/simple",
        "--torch-spec",
        "torch",
    )
    assert forced.returncode == 0, forced.stderr
    assert "continuing because of --force" in forced.stdout


def test_carrier_board_detected_from_the_module_part_number(tmp_path: Path) -> None:
    board = Board(R36_4, "Custom Carrier Board", "vendor,carrier nvidia,p3767-0001 nvidia,tegra234", 7_600_000)
    result = run_deploy(tmp_path, board)
    assert result.returncode == 0, result.stderr
    assert plan_values(result.stdout)["board"] == "orin-nx-8"


def test_overrides_and_bad_values(tmp_path: Path) -> None:
    result = run_deploy(
        tmp_path, BOARDS["orin-nano-8"], "--model", "HuggingFaceTB/SmolVLM2-2.2B-Instruct", "--budget", "768"
    )
    values = plan_values(result.stdout)
    assert (values["model"], values["budget"]) == ("HuggingFaceTB/SmolVLM2-2.2B-Instruct", "768")
    assert run_deploy(tmp_path / "b", BOARDS["orin-nano-8"], "--budget", "lots").returncode == 2
    unknown = run_deploy(tmp_path / "p", BOARDS["orin-nano-8"], "--power-mode", "TURBO")
    assert unknown.returncode == 2 and "MAXN 15W" in unknown.stderr


def test_fake_roots_are_refused_outside_a_dry_run(tmp_path: Path) -> None:
    result = run_deploy(tmp_path, BOARDS["orin-nano-8"], dry_run=False)
    assert result.returncode == 2 and "only go with --dry-run" in result.stderr
    assert not (tmp_path / "calls.log").exists()


# --- sandbox runs: idempotency --------------------------------------------------------------------

SANDBOX_TOOLS = {
    # dpkg-query -W -f=... PKG: installed when listed in state/apt.
    "dpkg-query": (
        'pkg=$(eval echo \\${$#}); grep -qx "$pkg" "$S/state/apt" 2>/dev/null || exit 1; echo "install ok installed"'
    ),
    "apt-get": (
        'echo "apt-get $*" >> "$S/calls.log"; '
        '[ "$1" = install ] && for p in "$@"; do echo "$p" >> "$S/state/apt"; done; exit 0'
    ),
    # python3 -m venv DIR: a venv whose python is the stub below.
    "python3": 'echo "python3 $*" >> "$S/calls.log"; mkdir -p "$3/bin"; cp "$S/venv-python" "$3/bin/python"',
    "systemctl": (
        'case $1 in is-enabled) test -f "$S/state/enabled";; is-active) test -f "$S/state/active";;'
        ' enable) echo "systemctl $*" >> "$S/calls.log"; touch "$S/state/enabled";;'
        ' restart) echo "systemctl $*" >> "$S/calls.log"; touch "$S/state/active";;'
        ' disable) echo "systemctl $*" >> "$S/calls.log"; rm -f "$S/state/enabled" "$S/state/active";;'
        ' *) echo "systemctl $*" >> "$S/calls.log";; esac'
    ),
    "nvpmodel": (
        'if [ "$1" = -q ]; then echo "NV Power Mode: MAXN"; cat "$S/state/pmode" 2>/dev/null || echo 1; '
        'else echo "nvpmodel $*" >> "$S/calls.log"; echo "$2" > "$S/state/pmode"; fi'
    ),
}
VENV_PYTHON = r"""#!/bin/sh
venv=$(dirname "$(dirname "$0")")
case "$*" in
  "-c import torch"*) [ -f "$venv/torch" ] && cat "$venv/torch"; [ -f "$venv/torch" ] ;;
  *"--index-url"*) echo "python $*" >> "$S/calls.log"; echo "2.8.0 12.6" > "$venv/torch" ;;
  *"-m pip install"*) echo "python $*" >> "$S/calls.log" ;;
  *check_cuda.py) echo "CUDA check passed" ;;
  *) echo "unexpected: $*" >&2; exit 1 ;;
esac
"""


def sandbox(tmp: Path) -> dict[str, str]:
    for sub in ("bin", "state"):
        (tmp / sub).mkdir(parents=True, exist_ok=True)
    for tool, body in SANDBOX_TOOLS.items():
        (tmp / "bin" / tool).write_text(f"#!/bin/sh\n{body}\n")
        (tmp / "bin" / tool).chmod(0o755)
    (tmp / "venv-python").write_text(VENV_PYTHON)
    (tmp / "venv-python").chmod(0o755)
    return {
        **os.environ,
        "PATH": f"{tmp / 'bin'}{os.pathsep}{os.environ['PATH']}",
        "S": str(tmp),
        "JETSON_DEPLOY_SANDBOX": str(tmp),
    }


def run_sandboxed(tmp: Path, env: dict[str, str], *args: str) -> tuple[subprocess.CompletedProcess, list[str]]:
    etc, proc = tmp / "root/etc", tmp / "root/proc"
    log = tmp / "calls.log"
    log.write_text("")
    cmd = [str(DEPLOY), "--etc-root", str(etc), "--proc-root", str(proc), "--prefix", str(tmp / "opt"),
           "--systemd-dir", str(tmp / "systemd"), "--user", "nobody", *args]  # fmt: skip
    result = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=60)
    return result, log.read_text().splitlines()


def test_second_install_changes_nothing_and_uninstall_undoes(tmp_path: Path) -> None:
    make_root(tmp_path / "root", BOARDS["orin-nano-8"])
    env = sandbox(tmp_path)
    first, calls = run_sandboxed(tmp_path, env, "--power-mode", "MAXN")
    assert first.returncode == 0, first.stderr + first.stdout
    assert any(c.startswith("apt-get install") for c in calls)
    assert any("--index-url" in c for c in calls) and any("-r " in c for c in calls)
    assert calls[-3:] == [
        "systemctl daemon-reload",
        "systemctl enable edge-assistant",
        "systemctl restart edge-assistant",
    ]
    assert "nvpmodel -m 0" in calls
    unit = tmp_path / "systemd/edge-assistant.service"
    assert (tmp_path / "opt/venv/torch-constraint.txt").read_text() == "torch==2.8.0\n"
    unit_mtime = unit.stat().st_mtime_ns

    second, calls = run_sandboxed(tmp_path, env, "--power-mode", "MAXN")
    assert second.returncode == 0, second.stderr
    assert calls == []  # nothing was installed, written, enabled or restarted
    assert unit.stat().st_mtime_ns == unit_mtime
    assert second.stdout.count("(nothing to do)") >= 7

    changed, calls = run_sandboxed(tmp_path, env, "--power-mode", "MAXN", "--budget", "512")
    assert calls == ["systemctl daemon-reload", "systemctl restart edge-assistant"]  # only the unit changed
    assert "--budget 512 " in unit.read_text()

    removed, calls = run_sandboxed(tmp_path, env, "--uninstall")
    assert removed.returncode == 0, removed.stderr
    assert calls[0] == "systemctl disable --now edge-assistant"
    assert not unit.exists() and not (tmp_path / "opt").exists()
    again, calls = run_sandboxed(tmp_path, env, "--uninstall")
    assert again.returncode == 0 and calls == []


def test_sandbox_refuses_real_tools(tmp_path: Path) -> None:
    make_root(tmp_path / "root", BOARDS["orin-nano-8"])
    env = sandbox(tmp_path)
    (tmp_path / "bin" / "systemctl").unlink()  # would fall through to a real systemctl
    result, calls = run_sandboxed(tmp_path, env)
    assert result.returncode == 2 and "systemctl must come from" in result.stderr
    assert calls == []
