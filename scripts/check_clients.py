"""Real clients against a running assistant: do the clients people use work with its API, as they are?

    pip install -r requirements-clients.txt        # the clients (langchain-openai, llm, schemathesis, ...)
    python scripts/check_clients.py                # every client: ~5 min on 2 cores (schemathesis is most of it)
    python scripts/check_clients.py --only openai langchain llm

Starts `python -m app --api --model tiny --mqtt ... --mqtt-commands` on a free loopback port with a token (and
the script's own mosquitto, where it is installed), then runs each client the way its users do:

    openai       the official SDK: sync, async, streamed with the usage chunk, the model cards, and its errors
                 (an option it cannot honour, an unknown model, a wrong token) carrying their reason
    langchain    LangChain's ChatOpenAI: invoke, stream, and structured output refused by name (not bad JSON)
    llm          Simon Willison's `llm` CLI, the stream registered as an OpenAI-compatible model
    httpx-sse    POST /api/v1/ask read as server-sent events: pieces, then the answer
    spec         openapi-spec-validator on /api/v1/openapi.json
    schemathesis every operation of the schema with generated requests: no 5xx, every response as the schema says
    mqtt         a Home Assistant-style MQTT command (`<prefix>/ask`) answered on the answer topic, and the
                 discovery configs as Home Assistant 2026 reads them (default_entity_id, no object_id)

The tiny model is random: answers are gibberish, and only the protocol is checked. Prints a table, writes it as
CSV (--out), and exits 1 when a check fails (2: a client is not installed: the message says which).
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench_api's server and broker helpers
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench_api import MOSQUITTO, PREFIX, Mosquitto, MqttAsker, Server  # noqa: E402

from capture.synth_camera import CameraVideoConfig, write_camera_video  # noqa: E402

TOKEN = "edge-" + os.urandom(12).hex()  # this run's own token (read, ask, manage)
CLIENTS = ("openai", "langchain", "llm", "httpx-sse", "spec", "schemathesis", "mqtt")
NEEDS = {  # client -> (module to import, what to install)
    "openai": ("openai", "openai"),
    "langchain": ("langchain_openai", "langchain-openai"),
    "llm": ("llm", "llm"),
    "httpx-sse": ("httpx_sse", "httpx-sse"),
    "spec": ("openapi_spec_validator", "openapi-spec-validator"),
    "schemathesis": ("schemathesis", "schemathesis"),
    "mqtt": ("paho.mqtt", "paho-mqtt"),
}
QUESTION = "What is in the picture?"


class Checks:
    """Collects (client, check, ok, detail) rows; `run` records a check's exception as its failure."""

    def __init__(self) -> None:
        self.rows: list[dict] = []

    def run(self, client: str, check: str, body: Callable[[], str]) -> None:
        started = time.perf_counter()
        try:
            detail, ok = body(), True
        except Exception as err:  # noqa: BLE001 - a failed check is a row, the others go on
            detail, ok = f"{type(err).__name__}: {err}", False
        seconds = round(time.perf_counter() - started, 2)
        self.rows.append({"client": client, "check": check, "ok": ok, "seconds": seconds, "detail": detail[:300]})
        mark = "ok  " if ok else "FAIL"
        print(f"{mark} {client:12} {check:38} {detail[:90]}", flush=True)


def expect(condition: bool, why: str) -> None:
    if not condition:
        raise AssertionError(why)


def refused(call: Callable[[], object], error: type[Exception]) -> Exception:
    """The exception `call` raises, which must be an `error`."""
    try:
        call()
    except error as err:
        return err
    raise AssertionError(f"no {error.__name__} raised")


def check_openai(checks: Checks, base: str, stream: str) -> None:
    import openai

    ai = openai.OpenAI(base_url=f"{base}/v1", api_key=TOKEN, max_retries=0, timeout=120)
    ask = [{"role": "user", "content": QUESTION}]

    def sync() -> str:
        reply = ai.chat.completions.create(model=stream, messages=ask, max_tokens=8)
        choice = reply.choices[0]
        expect(bool(choice.message.content), "an empty answer")
        expect(choice.finish_reason in ("stop", "length"), f"finish_reason {choice.finish_reason!r}")
        expect(reply.usage is not None and reply.usage.completion_tokens > 0, f"usage {reply.usage}")
        return f"{len(choice.message.content)} characters, finish_reason {choice.finish_reason}, usage {reply.usage}"

    def streamed() -> str:
        pieces, usage = [], None
        for chunk in ai.chat.completions.create(
            model=stream, messages=ask, stream=True, stream_options={"include_usage": True}
        ):
            pieces += [c.delta.content for c in chunk.choices if c.delta.content]
            usage = chunk.usage or usage
        expect(bool(pieces), "no piece")
        expect(usage is not None and usage.total_tokens > 0, "no usage chunk")
        return f"{len(pieces)} pieces, then usage {usage.total_tokens} tokens"

    def in_async() -> str:
        async def go():
            async with openai.AsyncOpenAI(base_url=f"{base}/v1", api_key=TOKEN, max_retries=0) as client:
                return await client.chat.completions.create(model=stream, messages=ask, max_tokens=8)

        reply = asyncio.run(go())
        expect(bool(reply.choices[0].message.content), "an empty answer")
        return f"{reply.choices[0].finish_reason}, {reply.usage.total_tokens} tokens"

    def models() -> str:
        listed = [m.id for m in ai.models.list()]
        expect(stream in listed, f"{stream} not in {listed}")
        expect(ai.models.retrieve(stream).id == stream, "the model card names another model")
        err = refused(lambda: ai.models.retrieve("no-such-camera"), openai.NotFoundError)
        expect(stream in str(err), f"the 404 does not name the models: {err}")
        return f"listed {listed}; an unknown model: {err}"

    def honest_refusals() -> str:
        said = []
        for option, value in (("n", 2), ("response_format", {"type": "json_object"}), ("logprobs", True)):
            err = refused(lambda o=option, v=value: ai.chat.completions.create(model=stream, messages=ask, **{o: v}),
                          openai.BadRequestError)  # fmt: skip
            expect(option in str(err), f"the refusal of {option} does not name it: {err}")
            said.append(f"{option}: {err.body.get('message', '')[:40] if isinstance(err.body, dict) else err}")
        return "; ".join(said)

    def wrong_token() -> str:
        stranger = openai.OpenAI(base_url=f"{base}/v1", api_key="not-" + TOKEN, max_retries=0)
        err = refused(lambda: stranger.chat.completions.create(model=stream, messages=ask), openai.AuthenticationError)
        expect(len(str(err)) > len("Error code: 401"), f"no reason given: {err}")
        return str(err)[:120]

    for name, body in (("chat (sync)", sync), ("chat (streamed, usage chunk)", streamed), ("chat (async)", in_async),
                       ("models list, card, unknown model", models), ("options it cannot honour", honest_refusals),
                       ("a wrong token", wrong_token)):  # fmt: skip
        checks.run("openai", name, body)


def check_langchain(checks: Checks, base: str, stream: str) -> None:
    import openai
    from langchain_openai import ChatOpenAI
    from pydantic import BaseModel

    chat = ChatOpenAI(base_url=f"{base}/v1", api_key=TOKEN, model=stream, max_retries=0, timeout=120)

    def invoke() -> str:
        said = chat.invoke(QUESTION).content
        expect(isinstance(said, str) and bool(said), f"content {said!r}")
        return f"{len(said)} characters"

    def streamed() -> str:
        chunks = [c.content for c in chat.stream(QUESTION)]
        expect(any(chunks), "no content streamed")
        return f"{len(chunks)} chunks"

    def structured() -> str:
        class Door(BaseModel):
            open: bool

        err = refused(lambda: chat.with_structured_output(Door).invoke("Is the door open?"), openai.BadRequestError)
        expect(any(word in str(err) for word in ("response_format", "tools")), f"not named: {err}")
        return str(err)[:120]

    checks.run("langchain", "invoke", invoke)
    checks.run("langchain", "stream", streamed)
    checks.run("langchain", "structured output refused by name", structured)


def check_llm(checks: Checks, base: str, stream: str) -> None:
    def cli() -> str:
        llm = shutil.which("llm") or str(Path(sys.executable).with_name("llm"))
        with tempfile.TemporaryDirectory() as home:
            models = f"- model_id: {stream}\n  model_name: {stream}\n  api_base: {base}/v1\n  api_key_name: edge\n"
            Path(home, "extra-openai-models.yaml").write_text(models)
            Path(home, "keys.json").write_text(json.dumps({"edge": TOKEN}))
            env = {**os.environ, "LLM_USER_PATH": home}
            done = subprocess.run([llm, "-m", stream, "--no-log", QUESTION], capture_output=True, text=True,
                                  env=env, timeout=180)  # fmt: skip
        expect(done.returncode == 0, f"exit {done.returncode}: {done.stderr[-300:]}")
        expect(bool(done.stdout.strip()), "no answer printed")
        return f"printed {len(done.stdout.strip())} characters"

    checks.run("llm", "llm -m STREAM 'question'", cli)


def check_sse(checks: Checks, base: str, stream: str) -> None:
    import httpx
    from httpx_sse import connect_sse

    def ask() -> str:
        kinds = []
        with httpx.Client(base_url=base, timeout=120, headers={"Authorization": f"Bearer {TOKEN}"}) as http:
            with connect_sse(http, "POST", "/api/v1/ask", json={"question": QUESTION, "stream": stream}) as events:
                expect(events.response.status_code == 200, f"HTTP {events.response.status_code}")
                for event in events.iter_sse():
                    kinds.append(event.event)
                    if event.event in ("answer", "error"):
                        break
        expect(kinds and kinds[-1] == "answer", f"events {kinds[-5:]}")
        return f"{len(kinds)} events, the last {kinds[-1]}"

    checks.run("httpx-sse", "POST /api/v1/ask as server-sent events", ask)


def schema_of(base: str) -> dict:
    import httpx

    return httpx.get(f"{base}/api/v1/openapi.json", headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30).json()


def check_spec(checks: Checks, base: str, stream: str) -> None:
    from openapi_spec_validator import validate

    def valid() -> str:
        schema = schema_of(base)
        validate(schema)
        return f"OpenAPI {schema.get('openapi')}, {len(schema.get('paths', {}))} paths"

    checks.run("spec", "openapi-spec-validator", valid)


# Rules no schema can state, so schemathesis's "a schema-valid request is accepted" check is off where they apply:
# a period's two ends against each other and against the timeline's --timeline-days (422, with the reason).
SEMANTIC_422 = """
[checks]
enabled = true

[[operations]]
include-path-regex = "^/api/v1/history/(summary|recap|day.png)$"
checks.positive_data_acceptance.enabled = false
"""


def check_schemathesis(checks: Checks, base: str, stream: str, examples: int, work: Path) -> None:
    def run() -> str:
        st = shutil.which("schemathesis") or str(Path(sys.executable).with_name("schemathesis"))
        report, config = work / "schemathesis.txt", work / "schemathesis.toml"
        config.write_text(SEMANTIC_422)
        argv = [st, "--config-file", str(config), "run", f"{base}/api/v1/openapi.json",
                "-H", f"Authorization: Bearer {TOKEN}", "--max-examples", str(examples),
                "--seed", "0", "--phases", "examples,coverage,fuzzing"]  # fmt: skip
        done = subprocess.run(argv, capture_output=True, text=True, timeout=1800, cwd=work)  # its cache: there
        report.write_text(done.stdout + done.stderr)
        tail = [line for line in done.stdout.splitlines() if line.strip()][-3:]
        expect(done.returncode == 0, f"exit {done.returncode} ({report}): {' | '.join(tail)}")
        return " | ".join(tail)[:250]

    checks.run("schemathesis", f"every operation, {examples} examples each", run)


def check_mqtt(checks: Checks, broker: Mosquitto | None, stream: str) -> None:
    if broker is None:
        checks.run("mqtt", "HA-style command", lambda: expect(False, "mosquitto not found (apt-get install mosquitto)"))
        return

    def ask() -> str:
        asker = MqttAsker(broker.port, stream)
        try:
            request, seconds, _ = asker.ask(QUESTION)
        finally:
            asker.close()
        return f"answered as {request} in {seconds:.1f} s"

    def discovery() -> str:
        import paho.mqtt.client as paho
        from paho.mqtt.enums import CallbackAPIVersion

        configs: dict[str, dict] = {}
        got = threading.Event()

        def message(client, userdata, msg) -> None:
            if msg.payload:
                configs[msg.topic] = json.loads(msg.payload)
                got.set()

        client = paho.Client(CallbackAPIVersion.VERSION2, client_id="check-clients-ha")
        client.on_connect = lambda c, *_: c.subscribe("homeassistant/#")
        client.on_message = message
        client.connect("127.0.0.1", broker.port)
        client.loop_start()
        got.wait(20)
        time.sleep(1.0)  # the rest of the retained configs
        client.loop_stop()
        client.disconnect()
        expect(bool(configs), "no discovery config under homeassistant/")
        old = [t for t, c in configs.items() if "object_id" in c]
        expect(not old, f"object_id still in {old[:3]}")
        expect(all("default_entity_id" in c for c in configs.values()), "a config without default_entity_id")
        return f"{len(configs)} configs, each with default_entity_id"

    checks.run("mqtt", f"{PREFIX}/ask answered on the answer topic", ask)
    checks.run("mqtt", "Home Assistant discovery configs", discovery)


def missing_clients(chosen: list[str]) -> list[str]:
    import importlib.util

    return [NEEDS[c][1] for c in chosen if importlib.util.find_spec(NEEDS[c][0].split(".")[0]) is None]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--only", nargs="+", choices=CLIENTS, default=list(CLIENTS), metavar="CLIENT",
                   help=f"clients to check (default: all): {', '.join(CLIENTS)}")  # fmt: skip
    p.add_argument("--examples", type=int, default=20, help="schemathesis examples per operation (default 20)")
    p.add_argument("--model", default="tiny", help="the model the assistant runs (default: tiny)")
    p.add_argument("--out", type=Path, default=None, help="write the table as CSV here")
    args = p.parse_args(argv)
    if args.examples < 1:
        p.error(f"--examples must be >= 1, got {args.examples}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if missing := missing_clients(args.only):
        print(f"not installed: {', '.join(missing)} (pip install -r requirements-clients.txt)", file=sys.stderr)
        return 2
    checks = Checks()
    with tempfile.TemporaryDirectory(prefix="check-clients-") as tmp:
        work = Path(tmp)
        video = work / "camera.mp4"
        write_camera_video(video, CameraVideoConfig(size=(320, 240), fps=5.0, duration_s=16.0))
        os.environ["EDGE_ASSISTANT_API_TOKENS"] = f"{TOKEN} read,ask,manage checker"
        broker = Mosquitto(work / "mqtt").__enter__() if MOSQUITTO and "mqtt" in args.only else None
        try:
            mqtt = ["--mqtt", broker.url, "--mqtt-commands"] if broker else []
            flags = ["--every", "0", "--max-new-tokens", "8", "--timeline", str(work / "timeline.sqlite"), *mqtt]
            with Server(work / "server", video, args.model, *flags) as server:
                server.http.headers["Authorization"] = f"Bearer {TOKEN}"
                server.wait_for_clips(1)
                stream = server.stream()["name"]
                for client in args.only:
                    if client == "schemathesis":
                        check_schemathesis(checks, server.base, stream, args.examples, work)
                    elif client == "mqtt":
                        check_mqtt(checks, broker, stream)
                    else:
                        run = {"openai": check_openai, "langchain": check_langchain, "llm": check_llm,
                               "httpx-sse": check_sse, "spec": check_spec}[client]  # fmt: skip
                        run(checks, server.base, stream)
        finally:
            if broker is not None:
                broker.__exit__()
            if (work / "schemathesis.txt").exists() and args.out:  # its whole report, beside the table
                args.out.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy(work / "schemathesis.txt", args.out.with_suffix(".schemathesis.txt"))
    failed = [r for r in checks.rows if not r["ok"]]
    print(f"{len(checks.rows) - len(failed)} of {len(checks.rows)} checks passed")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        with args.out.open("w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=["client", "check", "ok", "seconds", "detail"])
            writer.writeheader()
            writer.writerows(checks.rows)
        print(f"wrote {args.out}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
