"""The HTTP API's own costs: `python -m app --api --model tiny` started as a subprocess on a free 127.0.0.1 port
(no tokens: loopback), driven the way its clients drive it.

Measured:
- first piece: a question until its first streamed piece reaches the client, through `POST /api/v1/ask` (SSE)
  and through `/v1/chat/completions` (stream=True, the `openai` client), next to the same answer's in-process
  `ttft_s` (the question reaching the model until its first token, from the event log): overhead = first piece -
  ttft is what HTTP, the command queue (a clip being ingested when the question comes waits its turn) and the
  event hand-off add. delivery: the piece's `t_wall` on the model worker until the client has it.
- MQTT command: the same server run with `--mqtt --mqtt-commands` against the script's own mosquitto (a free
  127.0.0.1 port, a temporary config, always stopped), a paho client asking on `<prefix>/ask` with an id. An MQTT
  answer arrives whole (no pieces): question -> answer received, against the answer's in-process ttft + decode
  time (`ttft_s` + `answer_tokens / decode_tokens_per_s`); delivery: the answer's `t_wall` until the client has it.
  The three routes are asked in turn, so they see the same conditions. Without mosquitto its row stays empty.
- feed: events per second received by 1, 10 and 50 concurrent `GET /api/v1/events` clients over a fixed window,
  the assistant as busy as it goes (--no-realtime, a question every second of stream); ids missed (gaps) and
  clients dropped for falling behind, next to what the assistant published in the same window.
- watches: the server process's CPU seconds per second of stream (psutil, every thread) on a static camera with
  0 watches, 100 `on_change` watches (every 2 s) and 100 watches checked every 2 s, added through
  `POST /api/v1/watches`.

Writes docs/api_bench.csv and docs/api_bench.png (--out); prints the tables. With the tiny random model the
figures are the API's overhead, not the model's speed.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import csv
import json
import os
import platform
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx
import psutil
from tqdm import tqdm

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from capture.synth_camera import CameraVideoConfig, write_camera_video  # noqa: E402

COLUMNS = ["part", "setting", "measure", "unit", "samples", "value", "p90", "load_1m", "note"]
COUNT_UNITS = {"count", "checks/s"}  # may be 0; every other measured value is a time or a rate and is > 0
CLIP_S = 4.0  # the app's default --clip-seconds (--quick: half of it, so that its waits on clips are half)
MOSQUITTO = shutil.which("mosquitto") or shutil.which("mosquitto", path="/usr/sbin:/usr/local/sbin")
NO_MQTT = "not measured: mosquitto not found (apt-get install mosquitto)"
PREFIX = "edge-assistant"  # the app's default --mqtt-prefix
MQTT_ROUTE = "MQTT command (<prefix>/ask, paho)"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """`python -m app --api ...` on a free loopback port, its output and event log in `folder`."""

    def __init__(self, folder: Path, video: Path, model: str, *extra: str, log: bool = True) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.folder, self.port = folder, free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.log = folder / "events.jsonl"
        self.args = [sys.executable, "-m", "app", "--api", "--model", model, "--video", str(video), "--loop",
                     "--port", str(self.port), "--quiet", *extra]  # fmt: skip
        if log:
            self.args += ["--log-jsonl", str(self.log)]

    def start(self) -> None:
        """Starts the process (`with` waits until it serves; start it early and its start overlaps other work)."""
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        with open(self.folder / "server.txt", "w") as out:
            self.process = subprocess.Popen(self.args, cwd=REPO, stdout=out, stderr=subprocess.STDOUT, env=env)

    def __enter__(self) -> Server:
        output = self.folder / "server.txt"
        if not hasattr(self, "process"):
            self.start()
        deadline = time.monotonic() + 600  # a first start on a machine builds the CPU kernels (a minute or more)
        while "api ready" not in output.read_text():
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.process.kill()
                raise RuntimeError(f"the API did not start:\n{output.read_text()[-3000:]}")
            time.sleep(0.2)
        self.ps = psutil.Process(self.process.pid)
        self.http = httpx.Client(base_url=self.base, timeout=120)
        return self

    def __exit__(self, *exc) -> None:
        self.http.close()
        self.process.terminate()
        try:
            self.process.wait(60)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(10)

    def kill(self) -> None:
        """Ends a started process that is still running (after `with`: nothing to do)."""
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)

    def cpu_s(self) -> float:
        """CPU seconds the server process used so far (every thread: the model worker, capture, HTTP)."""
        t = self.ps.cpu_times()
        return t.user + t.system + t.children_user + t.children_system

    def stream(self) -> dict:
        return self.http.get("/api/v1/streams").json()[0]

    def wait_for_clips(self, clips: int, timeout: float = 300.0) -> None:
        deadline = time.monotonic() + timeout
        while self.stream()["clips"] < clips:
            if time.monotonic() > deadline:
                raise TimeoutError(f"fewer than {clips} clips after {timeout:g} s")
            time.sleep(0.2)

    def records(self) -> list[dict]:
        whole = self.log.read_text().split("\n")[:-1]  # the last piece: "" or a line still being written
        return [json.loads(line) for line in whole if line.strip()]

    def answers(self, requests: list[str], timeout: float = 30.0) -> dict[str, dict]:
        """The logged answers by request id, once every one of `requests` is in the event log (its writer lags)."""
        deadline = time.monotonic() + timeout
        while True:
            got = {r["request"]: r for r in self.records() if r["type"] == "answer" and r.get("request")}
            if all(r in got for r in requests) or time.monotonic() > deadline:
                return got
            time.sleep(0.05)


def sse_events(lines):
    """(event, data) of each event of a text/event-stream, from its lines."""
    kind, data = "message", []
    for line in lines:
        if not line:
            if data:
                yield kind, "\n".join(data)
            kind, data = "message", []
        elif line.startswith("event: "):
            kind = line[7:]
        elif line.startswith("data: "):
            data.append(line[6:])


def row(part, setting, measure, unit, values, note="") -> dict:
    values = [v for v in values if v is not None]
    value = round(statistics.median(values), 4) if values else ""
    p90 = round(statistics.quantiles(values, n=10)[-1], 4) if len(values) >= 2 else ""
    load = round(os.getloadavg()[0], 2)
    return dict(part=part, setting=setting, measure=measure, unit=unit, samples=len(values), value=value, p90=p90,
                load_1m=load, note=note)  # fmt: skip


# -- question -> first piece -------------------------------------------------------------------------------------


class PieceWatcher:
    """A `GET /api/v1/events?types=answer_piece` client on its own thread: the `t_wall` of each request's first
    piece, taken on the model worker when it was published. `close()` ends it (a feed client still connected holds
    the server's shutdown until its 10-second join gives up)."""

    def __init__(self, server: Server) -> None:
        self.first: dict[str, float] = {}
        self.connected = threading.Event()
        self.loop = asyncio.new_event_loop()
        self.task = self.loop.create_task(self._read(server.base))
        self.thread = threading.Thread(target=self._run, name="piece-watcher", daemon=True)
        self.thread.start()
        if not self.connected.wait(60):
            raise TimeoutError("the events feed did not answer")

    def _run(self) -> None:
        with contextlib.suppress(asyncio.CancelledError):
            self.loop.run_until_complete(self.task)
        self.loop.close()

    async def _read(self, base: str) -> None:
        try:
            async with httpx.AsyncClient(timeout=None) as client:
                async with client.stream("GET", f"{base}/api/v1/events?types=answer_piece") as reply:
                    lines = reply.aiter_lines()
                    if (await anext(lines)).startswith(": connected"):
                        self.connected.set()
                    kept: list[str] = []
                    async for line in lines:  # sse_events on each event's lines, as they come
                        kept.append(line)
                        if line:
                            continue
                        for kind, data in sse_events(kept):
                            record = json.loads(data)
                            if kind == "answer_piece" and record.get("request"):
                                self.first.setdefault(record["request"], record["t_wall"])
                        kept = []
        except httpx.HTTPError:
            pass  # the server stopped: the feed's connection ends with it

    def wait_for(self, requests: list[str], timeout: float = 10.0) -> None:
        """Until the first piece of each of `requests` came in (bounded: a missing one leaves its delivery out)."""
        deadline = time.monotonic() + timeout
        while any(r not in self.first for r in requests) and time.monotonic() < deadline:
            time.sleep(0.05)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.task.cancel)
        self.thread.join(30)


def ask_sse(server: Server, stream: str, question: str) -> tuple[str, float, float]:
    """(request id, seconds to the first `piece`, wall time it arrived)."""
    body = {"question": question, "stream": stream, "streaming": True}
    request, first = None, None
    t0 = time.perf_counter()
    with server.http.stream("POST", "/api/v1/ask", json=body) as reply:
        for kind, data in sse_events(reply.iter_lines()):
            if kind == "start":
                request = json.loads(data)["request"]
            elif kind == "piece" and first is None:
                first = (time.perf_counter() - t0, time.time())
    return request, *first


def ask_openai(ai, stream: str, question: str) -> tuple[str, float, float]:
    first, request = None, None
    t0 = time.perf_counter()
    for chunk in ai.chat.completions.create(model=stream, messages=[{"role": "user", "content": question}],
                                            stream=True):  # fmt: skip
        if first is None and chunk.choices and chunk.choices[0].delta.content:
            first = (time.perf_counter() - t0, time.time())
        request = (chunk.model_extra or {}).get("request") or request
    return request, *first


class Mosquitto:
    """The script's own MQTT broker: mosquitto on a free 127.0.0.1 port, its config and log in `folder`. Leaving
    the `with` always stops it."""

    def __init__(self, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.folder, self.port = folder, free_port()
        self.url = f"mqtt://127.0.0.1:{self.port}"

    def __enter__(self) -> Mosquitto:
        lines = [f"listener {self.port} 127.0.0.1", "allow_anonymous true", "persistence false"]
        if os.geteuid() == 0:  # else mosquitto drops to its own user, who cannot read the temporary folder
            lines.append("user root")
        config, log = self.folder / "mosquitto.conf", self.folder / "mosquitto.log"
        config.write_text("\n".join(lines) + "\n")
        with log.open("w") as out:
            self.process = subprocess.Popen([MOSQUITTO, "-c", str(config)], stdout=out, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
                return self
            except OSError:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    self.__exit__()
                    raise RuntimeError(f"mosquitto did not start:\n{log.read_text()[-2000:]}") from None
                time.sleep(0.05)

    def __exit__(self, *exc) -> None:
        self.process.terminate()
        try:
            self.process.wait(5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(5)


class MqttAsker:
    """A paho client (the library of outputs/mqtt.py) that asks on `<prefix>/ask` with an id and waits for the
    answer whose `request` is `mqtt-<id>` on the stream's answer topic (or for a refusal on `<prefix>/ask/result`)."""

    def __init__(self, port: int, stream: str) -> None:
        import paho.mqtt.client as paho
        from paho.mqtt.enums import CallbackAPIVersion

        self.stream, self.asked = stream, 0
        self.arrived: dict[str, tuple[float, float, dict]] = {}  # id -> perf_counter, wall time, payload
        self.changed = threading.Condition()
        subscribed = threading.Event()
        self.client = paho.Client(CallbackAPIVersion.VERSION2, client_id="bench-api")
        self.client.on_connect = lambda client, *_: client.subscribe(
            [(f"{PREFIX}/{stream}/answer", 1), (f"{PREFIX}/ask/result", 1)]
        )
        self.client.on_subscribe = lambda *_: subscribed.set()
        self.client.on_message = self._message
        self.client.connect("127.0.0.1", port)
        self.client.loop_start()
        if not subscribed.wait(30):
            raise TimeoutError("no subscription to the answer topic")

    def _message(self, client, userdata, message) -> None:
        arrived, wall = time.perf_counter(), time.time()
        payload = json.loads(message.payload)
        if message.topic.endswith("/answer") and str(payload.get("request", "")).startswith("mqtt-"):
            ident = payload["request"].removeprefix("mqtt-")
        elif message.topic.endswith("/ask/result") and payload.get("ok") is False and payload.get("id"):
            ident = payload["id"]
        else:
            return  # an answer of another request, or a question queued: its answer comes later
        with self.changed:
            self.arrived[ident] = (arrived, wall, payload)
            self.changed.notify_all()

    def ask(self, question: str) -> tuple[str, float, float]:
        """(request id, seconds to the whole answer, wall time it arrived); asked again while the run is not
        ready to take commands."""
        deadline = time.monotonic() + 120
        while True:
            self.asked += 1
            ident = f"bench-{self.asked}"
            body = json.dumps({"question": question, "stream": self.stream, "id": ident})
            t0 = time.perf_counter()
            self.client.publish(f"{PREFIX}/ask", body, qos=1)
            with self.changed:
                if not self.changed.wait_for(lambda: ident in self.arrived, timeout=120):  # noqa: B023
                    raise TimeoutError(f"no answer to {question!r} over MQTT")
                arrived, wall, payload = self.arrived.pop(ident)
            if payload.get("ok") is not False:
                return f"mqtt-{ident}", arrived - t0, wall
            if payload.get("code") != "not_ready" or time.monotonic() > deadline:
                raise RuntimeError(f"the MQTT question was refused: {payload}")
            time.sleep(0.5)

    def close(self) -> None:
        self.client.disconnect()
        self.client.loop_stop()


def measure_first_piece(server: Server, repeats: int, bar: tqdm, broker: Mosquitto | None) -> list[dict]:
    from openai import OpenAI

    ai = OpenAI(base_url=f"{server.base}/v1", api_key="loopback", max_retries=0)
    stream = server.stream()["name"]
    routes = {"POST /api/v1/ask (SSE, httpx)": lambda q: ask_sse(server, stream, q),
              "/v1/chat/completions (stream, openai)": lambda q: ask_openai(ai, stream, q)}  # fmt: skip
    mqtt = MqttAsker(broker.port, stream) if broker else None
    if mqtt:
        routes[MQTT_ROUTE] = mqtt.ask
    got: dict[str, list] = {name: [] for name in routes}
    pieces = PieceWatcher(server)
    ask_sse(server, stream, "Warm-up: what is there?")  # the first answer pays one-time costs
    if mqtt:
        mqtt.ask("Warm-up: what is there?")  # and waits until the run takes commands
    for i in range(repeats):
        for name, ask in routes.items():  # interleaved: every route sees the same conditions
            got[name].append(ask(f"What is in view now ({i})?"))
            bar.update()
    if mqtt:
        mqtt.close()
    asked = [request for answers in got.values() for request, _, _ in answers]
    records = server.answers(asked)  # once the event log's writer caught up
    ttft = {request: r["ttft_s"] for request, r in records.items()}
    pieces.wait_for([request for name, answers in got.items() if name != MQTT_ROUTE for request, _, _ in answers])
    pieces.close()
    piece_wall = pieces.first
    over_mqtt = got.pop(MQTT_ROUTE, None)
    rows = []
    for name, answers in got.items():
        first_ms = [1000 * s for _, s, _ in answers]
        ttft_ms = [1000 * ttft[req] for req, _, _ in answers]
        delivery = [1000 * (arrived - piece_wall[req]) for req, _, arrived in answers if req in piece_wall]
        rows += [
            row("first_piece", name, "first_piece_ms", "ms", first_ms),
            row("first_piece", name, "ttft_ms", "ms", ttft_ms, "in-process: the answer's ttft_s"),
            row("first_piece", name, "overhead_ms", "ms", [f - t for f, t in zip(first_ms, ttft_ms, strict=True)],
                "first piece - ttft, per question"),  # fmt: skip
            row("first_piece", name, "delivery_ms", "ms", delivery, "the piece's t_wall on the worker -> the client"),
        ]  # fmt: skip
    rows += (
        mqtt_rows(over_mqtt, records) if over_mqtt else [row("first_piece", MQTT_ROUTE, "answer_ms", "ms", [], NO_MQTT)]
    )
    return rows


def mqtt_rows(asked: list[tuple[str, float, float]], answers: dict[str, dict]) -> list[dict]:
    """An MQTT answer arrives whole: its time against the in-process ttft + decode time of the same answer."""
    answer_ms = [1000 * s for _, s, _ in asked]
    records = [answers[request] for request, _, _ in asked]
    ttft_ms = [1000 * r["ttft_s"] for r in records]
    decode_ms = [1000 * r["answer_tokens"] / r["decode_tokens_per_s"] if r["decode_tokens_per_s"] else 0.0
                 for r in records]  # fmt: skip
    own_ms = [t + d for t, d in zip(ttft_ms, decode_ms, strict=True)]
    overhead = [a - o for a, o in zip(answer_ms, own_ms, strict=True)]
    delivery = [1000 * (arrived - r["t_wall"]) for (_, _, arrived), r in zip(asked, records, strict=True)]
    return [
        row("first_piece", MQTT_ROUTE, "answer_ms", "ms", answer_ms, "the whole answer: MQTT answers have no pieces"),
        row("first_piece", MQTT_ROUTE, "ttft_ms", "ms", ttft_ms, "in-process: the answer's ttft_s"),
        row("first_piece", MQTT_ROUTE, "in_process_ms", "ms", own_ms, "in-process: ttft_s + tokens / decode rate"),
        row("first_piece", MQTT_ROUTE, "overhead_ms", "ms", overhead, "answer - (ttft + decode), per question"),
        row("first_piece", MQTT_ROUTE, "delivery_ms", "ms", delivery, "the answer's t_wall on the worker -> client"),
    ]


# -- the events feed -----------------------------------------------------------------------------------------------


class FeedReader:
    """One `GET /api/v1/events` client: what arrived when, gaps in the ids, `dropped`/`gap` events."""

    def __init__(self) -> None:
        self.arrivals: list[float] = []
        self.gaps = 0
        self.dropped = 0
        self.last_id: int | None = None
        self.connected = asyncio.Event()

    async def run(self, client: httpx.AsyncClient) -> None:
        async with client.stream("GET", "/api/v1/events") as reply:
            ident, kind = None, "message"
            async for line in reply.aiter_lines():
                if line.startswith(": connected"):
                    self.connected.set()
                elif line.startswith("id: "):
                    ident = int(line[4:])
                elif line.startswith("event: "):
                    kind = line[7:]
                elif line.startswith("data: "):
                    self.arrivals.append(time.perf_counter())
                    if kind == "dropped":
                        self.dropped += 1
                    elif kind == "gap":
                        self.gaps += json.loads(line[6:])["missed"]
                    if ident is not None:
                        if self.last_id is not None and ident > self.last_id + 1:
                            self.gaps += ident - self.last_id - 1
                        self.last_id = ident
                    ident, kind = None, "message"


async def feed_window(server: Server, clients: int, window_s: float) -> dict:
    limits = httpx.Limits(max_connections=clients + 2, max_keepalive_connections=clients + 2)
    async with httpx.AsyncClient(base_url=server.base, timeout=None, limits=limits) as client:
        readers = [FeedReader() for _ in range(clients)]
        tasks = [asyncio.create_task(r.run(client)) for r in readers]
        await asyncio.wait_for(asyncio.gather(*(r.connected.wait() for r in readers)), 60)
        before = (await client.get("/api/v1/status")).json()["feed"]
        cpu0, t0 = server.cpu_s(), time.perf_counter()
        await asyncio.sleep(window_s)
        t1, cpu1 = time.perf_counter(), server.cpu_s()
        after = (await client.get("/api/v1/status")).json()["feed"]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    seconds = t1 - t0
    received = [sum(t0 <= a < t1 for a in r.arrivals) / seconds for r in readers]
    published = (after["events"] - before["events"]) / seconds
    return {
        "received": received,
        "published": published,
        "gaps": sum(r.gaps for r in readers),
        "dropped": sum(r.dropped for r in readers) + after["dropped_clients"] - before["dropped_clients"],
        "lost": after["lost_events"] - before["lost_events"],
        "cpu": (cpu1 - cpu0) / seconds,
    }


def measure_feed(server: Server, counts: list[int], window_s: float, bar: tqdm) -> list[dict]:
    rows = []
    for n in counts:
        got = asyncio.run(feed_window(server, n, window_s))
        setting = f"{n} client{'s' * (n > 1)}, {window_s:g} s"
        share = sum(got["received"]) / (n * got["published"])
        rows += [
            row("feed", setting, "published_events_per_s", "events/s", [got["published"]], "the assistant's output"),
            row("feed", setting, "events_per_s_per_client", "events/s", got["received"], "p90 column: 90th pct"),
            row("feed", setting, "min_events_per_s_of_a_client", "events/s", [min(got["received"])]),
            row("feed", setting, "delivered_share", "share", [share], "received / (clients x published)"),
            row("feed", setting, "ids_missed", "count", [got["gaps"]], "gaps in the ids, all clients"),
            row("feed", setting, "clients_dropped", "count", [got["dropped"]], f"{got['lost']} events lost"),
            row("feed", setting, "server_cpu_s_per_s", "s/s", [got["cpu"]], "the whole server, 2 cores = 2.0"),
        ]
        bar.update()
    return rows


# -- watches -------------------------------------------------------------------------------------------------------


def next_clip(server: Server, clips: int = 1) -> dict:
    """The stream's view right after `clips` more clips came in (polled every 0.25 s, a light load on all
    settings alike)."""
    start = server.stream()["clips"]
    deadline = time.monotonic() + 120 * clips
    while (view := server.stream())["clips"] < start + clips:
        if time.monotonic() > deadline:
            raise TimeoutError(f"{clips} clips did not come in")
        time.sleep(0.25)
    return view


def watch_window(server: Server, seconds: float) -> tuple[float, float, float, float]:
    """(CPU seconds, stream seconds, wall start, wall end) from one clip's arrival to the first clip's arrival at
    least `seconds` later (stream time counts the clips a busy worker dropped too)."""
    view = next_clip(server)
    st0, cpu0, w0 = view["stream_time"], server.cpu_s(), time.time()
    time.sleep(max(seconds - 1.0, 0.0))
    view = next_clip(server)
    st1, cpu1, w1 = view["stream_time"], server.cpu_s(), time.time()
    return cpu1 - cpu0, st1 - st0, w0, w1


def call(server: Server, method: str, path: str, busy: list[int], **kwargs) -> httpx.Response:
    """A watch request, sent again after its Retry-After while the assistant's command queue is full (429:
    the worker is busy; each add or remove is one command); `busy` counts those refusals."""
    while (reply := server.http.request(method, path, **kwargs)).status_code == 429:
        busy[0] += 1
        time.sleep(float(reply.headers.get("retry-after", "1")))
    reply.raise_for_status()
    return reply


WATCH_SETTINGS = (None, True, False)  # 0 watches, on_change watches, plain watches


def measure_watches(
    server: Server, count: int, seconds: float, clip_s: float, bar: tqdm, kinds=WATCH_SETTINGS, settle: int = 2
) -> list[dict]:
    """0 watches, `count` on_change watches, `count` plain watches (those of `kinds`: None, True, False), each
    every 2 s; threshold 0.99 so that no alert begins on the random model's p_yes: watches at rest, as most are
    most of the time. Each window begins `settle` clips after the watches were applied (and one more)."""
    labels = {None: "0 watches", True: f"{count} watches on_change, every 2 s", False: f"{count} watches, every 2 s"}
    settings = [(labels[kind], kind) for kind in kinds]
    rows = []
    for setting, on_change in settings:
        names, busy = [], [0]
        if on_change is not None:
            for i in range(count):
                body = {"name": f"bench-{i}", "question": f"Is there a parcel number {i} at the door?", "every": 2,
                        "on_change": on_change, "threshold": 0.99}  # fmt: skip
                names.append(call(server, "POST", "/api/v1/watches", busy, json=body).json()["name"])
            deadline = time.monotonic() + 120
            while len(server.stream()["watches"]) < count:  # applied by the model worker
                if time.monotonic() > deadline:
                    raise TimeoutError("the watches were not applied")
                time.sleep(0.2)
        next_clip(server, settle)  # every watch's first check (always run, even on_change) is behind us
        cpu, stream_s, w0, w1 = watch_window(server, seconds)
        records = [r for r in server.records() if w0 - 0.5 <= r["t_wall"] < w1]
        checks = [r for r in records if r["type"] == "check"]
        clips = [r for r in records if r["type"] == "clip"]
        dropped = clips[-1]["dropped_clips"] - clips[0]["dropped_clips"] if clips else 0
        due = f"due: {len(names) / max(clip_s, 2.0):g}/s (every 2 s, checked after each {clip_s:g}-second clip)"
        rows += [
            row("watches", setting, "cpu_s_per_stream_s", "s/s", [cpu / stream_s],
                f"{stream_s:.0f} stream s, {w1 - w0:.0f} s wall"),
            row("watches", setting, "checks_per_stream_s", "checks/s", [len(checks) / stream_s], due),
            row("watches", setting, "clips_dropped", "count", [dropped], "the worker fell behind the camera"),
        ]  # fmt: skip
        if checks:
            rows.append(row("watches", setting, "check_ms", "ms", [r["ms"] for r in checks], "on the model worker"))
        for name in names:
            call(server, "DELETE", f"/api/v1/watches/{name}", busy)
        if names:
            note = f"429 while adding and removing {len(names)} watches one by one, each sent again"
            rows.append(row("watches", setting, "busy_refusals", "count", [busy[0]], note))
        bar.update()
    return rows


# -- report --------------------------------------------------------------------------------------------------------


def machine() -> str:
    model = platform.processor() or platform.machine()
    try:
        lscpu = subprocess.run(["lscpu"], capture_output=True, text=True, timeout=10).stdout
        model = next(line.split(":", 1)[1].strip() for line in lscpu.splitlines() if line.startswith("Model name"))
    except (OSError, subprocess.SubprocessError, StopIteration):
        pass
    one, five, _ = os.getloadavg()
    return f"{model}, {os.cpu_count()} cores, no GPU; load average {one:.1f} (5 min: {five:.1f})"


def write_csv(rows: list[dict], path: Path) -> None:
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=COLUMNS)
        writer.writeheader()
        writer.writerows(rows)


def plot(rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    def pick(part, measure):
        return [r for r in rows if r["part"] == part and r["measure"] == measure and r["value"] != ""]

    fig, axes = plt.subplots(1, 3, figsize=(17, 4.8))
    ttft = {r["setting"]: r["value"] for r in pick("first_piece", "ttft_ms")}
    own = {r["setting"]: r["value"] for r in pick("first_piece", "in_process_ms")}  # MQTT: ttft + decode
    over = {r["setting"]: r["value"] for r in pick("first_piece", "overhead_ms")}
    settings = [s for s in ttft if s in over]
    labels = [s.replace(" (", "\n(") for s in settings]
    decode = [own.get(s, ttft[s]) - ttft[s] for s in settings]
    base = [ttft[s] + d for s, d in zip(settings, decode, strict=True)]
    axes[0].barh(labels, [ttft[s] for s in settings], color="tab:gray", label="in-process ttft")
    axes[0].barh(labels, decode, left=[ttft[s] for s in settings], color="silver", label="in-process decode (MQTT)")
    axes[0].barh(labels, [over[s] for s in settings], left=base, color="tab:blue", label="transport, queue, hand-off")
    axes[0].set_xlim(0, 2.2 * max(b + over[s] for s, b in zip(settings, base, strict=True)))  # room for the legend
    axes[0].legend(fontsize=8, loc="lower right")
    axes[0].set_xlabel("question -> first piece (MQTT: the answer), ms (median)")
    per_client, published = pick("feed", "events_per_s_per_client"), pick("feed", "published_events_per_s")
    clients = [int(r["setting"].split()[0]) for r in per_client]
    axes[1].plot(clients, [r["value"] for r in published], "o--", color="tab:gray", label="published")
    axes[1].plot(clients, [r["value"] for r in per_client], "o-", color="tab:blue", label="received per client")
    axes[1].set_xscale("log")
    axes[1].set_xlabel("concurrent feed clients")
    axes[1].set_ylabel("events/s")
    axes[1].legend(fontsize=8)
    cpu = pick("watches", "cpu_s_per_stream_s")
    axes[2].barh([r["setting"] for r in cpu], [r["value"] for r in cpu], color="tab:blue")
    axes[2].set_xlabel("server CPU s per stream s (static camera)")
    for ax, title in zip(axes, ["first streamed piece / MQTT answer", "events feed", "runtime watches"], strict=True):
        ax.set_title(title, fontsize=10)
    fig.suptitle("HTTP API on 127.0.0.1, tiny random model (scripts/bench_api.py)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--model", default="tiny", help="--model of the server")
    p.add_argument("--questions", type=int, default=8, help="questions per route")
    p.add_argument("--clients", type=int, nargs="+", default=[1, 10, 50], help="concurrent feed clients")
    p.add_argument("--feed-window", type=float, default=10.0, help="seconds each feed count is measured")
    p.add_argument("--watches", type=int, default=100, help="runtime watches added")
    p.add_argument("--watch-window", type=float, default=32.0, help="seconds each watch setting is measured")
    p.add_argument("--clip-seconds", type=float, default=CLIP_S, help="--clip-seconds of the servers")
    p.add_argument("--quick", action="store_true", help="a smoke run (for the test): 1 question per route, 2 feed "
                   "clients, 3 plain watches only, windows of 2 s, 2-second clips, 1 clip (not 2) waited for before "
                   "the questions, each watch window and the feed")  # fmt: skip
    p.add_argument("--out", type=Path, default=REPO / "docs", help="folder of api_bench.csv and api_bench.png")
    args = p.parse_args(argv)
    args.watch_kinds, args.first_clips = WATCH_SETTINGS, 2
    if args.quick:
        args.questions, args.clients, args.feed_window, args.watches, args.watch_window = 1, [2], 2.0, 3, 2.0
        args.clip_seconds, args.watch_kinds, args.first_clips = CLIP_S / 2, (False,), 1
    return args


def main(argv: list[str] | None = None) -> list[dict]:
    args = parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="bench-api-") as folder:  # the video, the servers' logs and timeline
        rows = measure(args, Path(folder))
    csv_path = args.out / "api_bench.csv"
    write_csv(rows, csv_path)
    plot(rows, args.out / "api_bench.png")
    print(f"Machine: {machine()}")
    for r in rows:
        print(f"{r['part']:>11}  {r['setting']:<40} {r['measure']:<30} {r['value']!s:>10} {r['p90']!s:>10} {r['unit']}")
    print(f"wrote {csv_path}")
    return rows


def preimport() -> None:
    """The clients' and the plot's modules (seconds of imports), loaded while the first server starts."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot  # noqa: F401
    import openai  # noqa: F401
    import paho.mqtt.client  # noqa: F401


def measure(args: argparse.Namespace, work: Path) -> list[dict]:
    threading.Thread(target=preimport, name="preimport", daemon=True).start()
    video = work / "static.mp4"
    write_camera_video(video, CameraVideoConfig(size=(320, 240), fps=5.0, duration_s=16.0))
    common = [
        "--max-new-tokens",
        "16",
        "--clip-seconds",
        str(args.clip_seconds),
        "--api-watches-per-token",
        str(max(args.watches, 64)),
    ]
    if MOSQUITTO is None:
        print(f"MQTT command {NO_MQTT}", file=sys.stderr)
    steps = (2 + (MOSQUITTO is not None)) * args.questions + len(args.clients) + len(args.watch_kinds)
    rows: list[dict] = []
    with tqdm(total=steps, desc="bench_api", unit="step") as bar, contextlib.ExitStack() as stack:
        broker = stack.enter_context(Mosquitto(work / "mqtt")) if MOSQUITTO else None
        mqtt = ["--mqtt", broker.url, "--mqtt-commands"] if broker else []
        feed_args = ["--no-realtime", "--every", "1", "--timeline", "", "--api-sse-clients", str(max(args.clients) + 4)]
        feed = Server(work / "feed", video, args.model, *feed_args, *common, log=False)
        with Server(work / "ask", video, args.model, "--every", "0", "--timeline", str(work / "tl.sqlite"),
                    *mqtt, *common) as server:  # fmt: skip
            server.wait_for_clips(args.first_clips)
            asked = measure_first_piece(server, args.questions, bar, broker)
            rows += asked + measure_watches(server, args.watches, args.watch_window, args.clip_seconds, bar,
                                            args.watch_kinds, args.first_clips)  # fmt: skip
            feed.start()  # its start (imports, the model) overlaps this server's stop; nothing is measured then
            stack.callback(feed.kill)  # if an error comes before its `with`
        with feed as server:
            server.wait_for_clips(args.first_clips)
            rows += measure_feed(server, args.clients, args.feed_window, bar)
    return rows


if __name__ == "__main__":
    main()
