"""A real MQTT broker on 127.0.0.1 for the output tests: Debian's mosquitto in a subprocess, on a free
port, with a small config written to a temporary folder; stop, start and restart keep the port.

Persistence is off by default: a restarted broker has forgotten every retained message, so a test can check
that the assistant itself puts its retained state back after reconnecting. With persistence on, the broker
keeps the retained messages of before the stop (stale if the state changed meanwhile) and persistent
sessions, so a subscriber misses nothing published while it reconnects.

Example::

    with MosquittoBroker(tmp_path) as broker:
        client.connect("127.0.0.1", broker.port)
        broker.restart()
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

MOSQUITTO_PACKAGE = "mosquitto"
START_TIMEOUT_S = 10.0


def mosquitto_path() -> str | None:
    """The mosquitto binary (Debian installs it in /usr/sbin, which a user's PATH may lack)."""
    return shutil.which("mosquitto") or shutil.which("mosquitto", path="/usr/sbin:/usr/local/sbin")


def require_mosquitto() -> str:
    """The binary's path; skips the test without it, fails it when EDGE_ASSISTANT_REQUIRE_TOOLS=1 (CI)."""
    path = mosquitto_path()
    if path is None:
        missing = f"mosquitto not found; apt-get install {MOSQUITTO_PACKAGE}"
        if os.environ.get("EDGE_ASSISTANT_REQUIRE_TOOLS") == "1":
            pytest.fail(missing)
        pytest.skip(missing)
    return path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class MosquittoBroker:
    """mosquitto listening on 127.0.0.1:`port` (a free one by default). A context manager: entering starts
    it, leaving always stops it. `users` (name -> password) turns anonymous access off. `persistence` keeps
    retained messages and persistent sessions across a stop/start (saved at SIGTERM). `tls` (certificate,
    key) makes the listener TLS only (mqtts)."""

    def __init__(
        self,
        folder: Path,
        port: int | None = None,
        users: dict[str, str] | None = None,
        persistence: bool = False,
        tls: tuple[Path, Path] | None = None,
    ) -> None:
        self.binary = require_mosquitto()
        self.folder = Path(folder)
        self.port = port or free_port()
        self.log = self.folder / "mosquitto.log"
        self.config = self.folder / "mosquitto.conf"
        lines = [f"listener {self.port} 127.0.0.1", "log_dest stderr", "log_type all"]
        self.tls = tls is not None
        if tls is not None:
            lines += [f"certfile {tls[0]}", f"keyfile {tls[1]}"]
        if os.geteuid() == 0:  # else mosquitto drops to the `mosquitto` user, who cannot read our temporary folder
            lines.append("user root")
        if persistence:
            lines += ["persistence true", f"persistence_location {self.folder}/"]
        else:
            lines.append("persistence false")
        if users:
            password_file = self.folder / "passwords"
            password_file.touch(mode=0o600)
            for name, password in users.items():
                subprocess.run(
                    [shutil.which("mosquitto_passwd") or "mosquitto_passwd", "-b", str(password_file), name, password],
                    check=True, capture_output=True, timeout=10,
                )  # fmt: skip
            lines += ["allow_anonymous false", f"password_file {password_file}"]
        else:
            lines.append("allow_anonymous true")
        self.config.write_text("\n".join(lines) + "\n")
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"{'mqtts' if self.tls else 'mqtt'}://127.0.0.1:{self.port}"

    def start(self) -> None:
        """Starts the broker and waits until it accepts connections."""
        assert self._proc is None, "already running"
        with self.log.open("ab") as log:
            self._proc = subprocess.Popen([self.binary, "-c", str(self.config)], stdout=log, stderr=log)
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                break
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
                return
            except OSError:
                time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"mosquitto did not start on port {self.port}: {self.log.read_text()[-2000:]}")

    def stop(self) -> None:
        """Stops the broker (SIGTERM, then SIGKILL); retained messages are gone with it."""
        if self._proc is None:
            return
        proc, self._proc = self._proc, None
        proc.send_signal(signal.SIGCONT)  # a paused broker could not end
        proc.terminate()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    def restart(self) -> None:
        self.stop()
        self.start()

    def pause(self) -> None:
        """Freezes the broker (SIGSTOP): connections stay open, nothing is read or acknowledged until `resume`."""
        assert self._proc is not None, "not running"
        self._proc.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        if self._proc is not None:
            self._proc.send_signal(signal.SIGCONT)

    def __enter__(self) -> MosquittoBroker:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()
