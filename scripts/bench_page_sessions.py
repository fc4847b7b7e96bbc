"""What anonymous API calls cost the page: `python -m app --ui --model tiny` on 127.0.0.1, then N calls of the
page's refresh endpoint, each from a new Gradio session (as a script or a flood would make them); prints the
process RSS before and after. With the cap on sessions (app.web.MAX_PAGE_SESSIONS) the RSS stops growing.

    python scripts/bench_page_sessions.py --calls 600
"""

from __future__ import annotations

import argparse
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[1]


def rss_bytes(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(status.split("VmRSS:")[1].split()[0]) * 1024


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def call(client: httpx.Client, base: str, fn_index: int, inputs: int, session: str) -> None:
    body = {"data": [None] * inputs, "fn_index": fn_index, "session_hash": session}
    client.post(f"{base}/gradio_api/queue/join", json=body).raise_for_status()
    with client.stream("GET", f"{base}/gradio_api/queue/data", params={"session_hash": session}) as resp:
        for line in resp.iter_lines():
            if "process_completed" in line:
                return


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=600, help="API calls, each from a new session")
    parser.add_argument("--warmup", type=int, default=20, help="calls before the first reading")
    args = parser.parse_args()
    port = free_port()
    app = [sys.executable, "-m", "app", "--ui", "--model", "tiny", "--port", str(port), "--timeline", ""]
    proc = subprocess.Popen(app, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        for line in proc.stdout:
            if line.startswith("page ready"):
                break
        else:
            print("the app did not start", file=sys.stderr)
            return 1
        base = f"http://127.0.0.1:{port}"
        with httpx.Client(timeout=60) as client:
            deps = client.get(f"{base}/config").json()["dependencies"]
            tick = next(d for d in deps if any(t[1] == "tick" for t in d["targets"]))
            for n in range(args.warmup):
                call(client, base, tick["id"], len(tick["inputs"]), f"warmup-{n}")
            before, started = rss_bytes(proc.pid), time.monotonic()
            for n in range(args.calls):
                call(client, base, tick["id"], len(tick["inputs"]), f"call-{n}")
            after = rss_bytes(proc.pid)
        print(
            f"{args.calls} calls in {time.monotonic() - started:.0f} s: RSS {before / 2**20:.0f} -> "
            f"{after / 2**20:.0f} MiB, {(after - before) / args.calls / 1024:.0f} KiB per call"
        )
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(60)
    return 0


if __name__ == "__main__":
    sys.exit(main())
