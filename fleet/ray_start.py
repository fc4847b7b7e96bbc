"""`python -m app ray-start ARGS...`: `ray start ARGS...` with Ray's token authentication set up (ray_token.py).

On the head's box (`--head`) it makes the cluster's token when there is none (mode 0600) and says where; on any
other box the token must be there already (a copy of the head's), or it stops with exit code 2 before Ray
starts. Ray then runs with `RAY_AUTH_MODE=token` and the token's path, and without its usage report. Everything
else (`--port`, `--node-ip-address`, `--resources`, `--labels`, `--block`, ...) goes to `ray start` unchanged."""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from fleet.ray_token import MODE_ENV, PATH_ENV, TokenError, check_token, ensure_token, token_path

Runner = Callable[[list[str], dict[str, str]], int]


def ray_command() -> str | None:
    """The `ray` CLI of this Python environment (else the one on PATH)."""
    here = Path(sys.executable).with_name("ray")
    return str(here) if here.exists() else shutil.which("ray")


def exec_ray(argv: list[str], env: dict[str, str]) -> int:
    """Becomes `ray start` (this process is replaced): a supervisor's signals (systemd's stop, Ctrl-C on
    `--block`) reach Ray itself, which then stops the node's processes."""
    os.execve(argv[0], argv, env)
    raise AssertionError("execve returned")  # it never does: it raises OSError or replaces the process


def main(args: Sequence[str], environ: Mapping[str, str] = os.environ, runner: Runner = exec_ray) -> int:
    """Starts this box's Ray node with token authentication; returns the exit code (2: no usable token)."""
    args = list(args)
    if args[:1] in (["-h"], ["--help"]):
        print(__doc__)
        return 0
    ray = ray_command()
    if ray is None:
        print("ray-start: the ray command is not installed here (pip install -r requirements.txt)", file=sys.stderr)
        return 2
    path = token_path(environ)
    try:
        if "--head" in args:
            if ensure_token(path):
                print(
                    f"ray-start: made the cluster's Ray token at {path}; copy it to every box (mode 0600)", flush=True
                )
        else:
            check_token(path)
    except (TokenError, OSError) as err:
        print(f"ray-start: {err}", file=sys.stderr)
        return 2
    env = {**environ, MODE_ENV: "token", PATH_ENV: str(path), "RAY_USAGE_STATS_ENABLED": "0"}
    if "--disable-usage-stats" not in args:
        args.append("--disable-usage-stats")
    return runner([ray, "start", *args], env)
