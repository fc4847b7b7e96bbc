"""An output is one registered thing (outputs/registry.py). The proof is CONTRIBUTING.md's recipe followed in this
file: a CSV file of alerts, registered here and nowhere in the project's source, is a flag and a --config key,
receives its alerts in a real run on one box, and runs only on the head of a fleet. The registry is also what the
start (nothing configured: no publisher), the publisher's filter and the fleet's split read."""

from __future__ import annotations

import csv
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path

import pytest

from app.cli import build_parser, main, parse_args
from app.config import AppConfig
from app.startup import start_publisher
from bus import Alert, Answer, ErrorEvent, Event, EventBus, Status, WatchEvent
from fleet.hosts import host_config
from outputs import OUTPUTS, MqttConfig, NtfyConfig, OutputKind, QueuedSink, SinkContext, WebhookConfig, register
from outputs.recaps import Digest
from outputs.registry import build_sinks, per_host, wanted_types
from tests.support.app_helpers import read_log, video
from tests.support.event_helpers import make_event

ALERTS = '[alerts.person]\nquestion = "Is there a person?"\nthreshold = 0.0\nevery = 4\non_after = 1\n'


# --- the recipe: one file's worth of output, registered in this test -------------------------------------------


@dataclass(frozen=True)
class CsvAlertsConfig:
    """path: the CSV file every alert's begin and end is appended to (created with a header row)."""

    path: Path = field(
        metadata={"flag": "--csv-alerts", "metavar": "PATH", "help": "append every alert's begin and end to this CSV"}
    )

    def __post_init__(self) -> None:
        if not str(self.path).endswith(".csv"):
            raise ValueError(f"--csv-alerts takes a file name ending in .csv, got {str(self.path)!r}")


class CsvAlertsSink:
    """One row per alert event: id, stream, alert, state, stream time (seconds)."""

    def __init__(self, config: CsvAlertsConfig) -> None:
        self.config = config
        self.name = f"csv {config.path.name}"

    def wants(self, event: Event) -> bool:
        return isinstance(event, Alert)

    def send(self, event: Event) -> None:
        assert isinstance(event, Alert)
        new = not self.config.path.exists()
        with self.config.path.open("a", newline="", encoding="utf-8") as file:
            writer = csv.writer(file)
            if new:
                writer.writerow(["id", "stream", "alert", "state", "stream_time"])
            writer.writerow([event.id, event.stream, event.alert, event.state, f"{event.stream_time:g}"])


CSV_ALERTS = OutputKind(
    "csv-alerts",
    CsvAlertsConfig,
    lambda config, context: QueuedSink(CsvAlertsSink(config), on_error=context.on_error),
    wants=(Alert,),
    switch="path",
)


@pytest.fixture
def csv_alerts() -> Iterator[OutputKind]:
    """CSV_ALERTS in the registry for one test."""
    register(CSV_ALERTS)
    try:
        yield CSV_ALERTS
    finally:
        OUTPUTS.pop(CSV_ALERTS.name)


def rows(path: Path) -> list[tuple[str, str]]:
    with path.open(encoding="utf-8") as file:
        return [(row["id"], row["state"]) for row in csv.DictReader(file)]


# --- the registry's readers ------------------------------------------------------------------------------------


def test_the_built_in_outputs_keep_the_flags_and_config_keys_users_know(tmp_path, monkeypatch):
    monkeypatch.setenv("EDGE_ASSISTANT_WEBHOOK_SECRET", "signing-key")
    assert list(OUTPUTS)[:3] == ["mqtt", "webhook", "ntfy"]
    site = tmp_path / "site.toml"
    site.write_text('webhook = ["http://127.0.0.1:9/a", "https://example.org/b"]\nmqtt_prefix = "home"\n')
    args = parse_args(
        ["--video", "a.mp4", "--timeline", "", "--config", str(site), "--mqtt", "mqtts://broker.lan",
         "--no-mqtt-discovery", "--mqtt-ca-file", str(tmp_path / "ca.pem"), "--ntfy", "https://ntfy.sh/door"]
    )  # fmt: skip
    outputs = AppConfig.from_args(args).outputs
    assert list(outputs) == ["mqtt", "webhook", "ntfy"]
    (mqtt,) = outputs["mqtt"]
    assert (mqtt.url, mqtt.prefix, mqtt.discovery, mqtt.ca_file) == (
        "mqtts://broker.lan",
        "home",
        False,
        tmp_path / "ca.pem",
    )
    assert [w.url for w in outputs["webhook"]] == ["http://127.0.0.1:9/a", "https://example.org/b"]
    assert {w.secret for w in outputs["webhook"]} == {"signing-key"}
    assert outputs["ntfy"] == [NtfyConfig("https://ntfy.sh/door")]
    assert AppConfig.from_args(parse_args(["--video", "a.mp4", "--timeline", ""])).outputs == {}


def test_the_secret_files_are_read_when_the_config_is_built(tmp_path):
    secret = tmp_path / "broker-password"
    secret.write_text("broker-pw\n")
    secret.chmod(0o600)
    args = parse_args(["--video", "a.mp4", "--timeline", "", "--mqtt", "mqtt://h", "--mqtt-password-file", str(secret)])
    assert [m.password for m in AppConfig.from_args(args).outputs["mqtt"]] == ["broker-pw"]
    secret.chmod(0o644)
    with pytest.raises(ValueError, match="other users may read it"):
        AppConfig.from_args(args)


def test_a_registered_output_is_a_flag_and_a_config_key(csv_alerts, tmp_path):
    assert "--csv-alerts PATH" in build_parser().format_help()
    args = parse_args(["--video", "a.mp4", "--timeline", "", "--csv-alerts", str(tmp_path / "alerts.csv")])
    assert AppConfig.from_args(args).outputs == {"csv-alerts": [CsvAlertsConfig(tmp_path / "alerts.csv")]}
    site = tmp_path / "site.toml"
    site.write_text(f'csv_alerts = "{tmp_path / "site.csv"}"\n')
    args = parse_args(["--video", "a.mp4", "--timeline", "", "--config", str(site)])
    assert AppConfig.from_args(args).outputs == {"csv-alerts": [CsvAlertsConfig(tmp_path / "site.csv")]}
    with pytest.raises(ValueError, match="ending in .csv"):  # its own check: the CLI's exit 2
        AppConfig.from_args(parse_args(["--video", "a.mp4", "--csv-alerts", "alerts.txt"]))


def test_a_kind_must_want_some_events_but_never_errors_and_be_switched_by_a_flag():
    sink = CSV_ALERTS.sink
    with pytest.raises(ValueError, match="never error events"):
        OutputKind("loop", CsvAlertsConfig, sink, wants=(ErrorEvent,), switch="path")
    with pytest.raises(ValueError, match="never error events"):
        OutputKind("everything", CsvAlertsConfig, sink, wants=(Event,), switch="path")
    with pytest.raises(ValueError, match="switch 'url'"):
        OutputKind("no-switch", CsvAlertsConfig, sink, wants=(Alert,))
    with pytest.raises(ValueError, match="registered already"):
        register(replace(OUTPUTS["ntfy"]))


def test_nothing_configured_starts_no_publisher_and_the_filter_is_what_the_outputs_want(csv_alerts, tmp_path):
    config = AppConfig.from_args(parse_args(["--video", "a.mp4", "--timeline", ""]))
    assert start_publisher(config, {}, EventBus()) is None
    assert wanted_types({"csv-alerts": [CsvAlertsConfig(tmp_path / "a.csv")]}) == (Alert,)
    assert wanted_types({"ntfy": [NtfyConfig("https://ntfy.sh/t")], "webhook": [WebhookConfig("http://h/x")]}) == (
        Alert,
        Digest,  # the recap of --digest-at (outputs/digest.py)
        Answer,
    )
    assert set(wanted_types({"mqtt": [MqttConfig("mqtt://h")]})) == {Alert, Answer, Status, WatchEvent, Digest}
    config = replace(config, outputs={"csv-alerts": [CsvAlertsConfig(tmp_path / "a.csv")]})
    bus = EventBus()
    publisher = start_publisher(config, {"door": ["person"]}, bus)
    assert publisher is not None and publisher.wants == (Alert,)
    try:
        bus.publish(make_event("answer", stream="door", round=1, stream_time=4.0, question="q", answer="a"))
        bus.publish(make_event("alert", stream="door", id="door-person-1", alert="person", state="begin"))
        bus.publish(make_event("error", stream=None, where="x", message="not an output's"))
    finally:
        bus.unsubscribe(publisher)
        publisher.close(timeout=5.0)
    assert rows(tmp_path / "a.csv") == [("door-person-1", "begin")]


def test_the_fleet_keeps_head_only_outputs_on_the_head_and_sends_per_host_ones_along(csv_alerts, tmp_path):
    config = AppConfig.from_args(parse_args(["--ray", "auto", "--stream", "a=a.mp4", "--timeline", ""]))
    on_every_host = register(replace(CSV_ALERTS, name="csv-per-host", head_only=False))  # (its flag would clash)
    try:
        outputs = {
            "mqtt": [MqttConfig("mqtt://h")],
            "csv-alerts": [CsvAlertsConfig(tmp_path / "head.csv")],
            "csv-per-host": [CsvAlertsConfig(tmp_path / "host.csv")],
        }
        assert per_host(outputs) == {"csv-per-host": [CsvAlertsConfig(tmp_path / "host.csv")]}
        assert host_config(replace(config, outputs=outputs)).outputs == per_host(outputs)
        sinks = build_sinks(per_host(outputs), SinkContext(on_error=print))
        assert [s.name for s in sinks] == ["csv host.csv"]
    finally:
        OUTPUTS.pop(on_every_host.name)
    with pytest.raises(ValueError, match="no output named 'csv-per-host' is registered in this process"):
        build_sinks(outputs, SinkContext(on_error=print))


# --- real runs ---------------------------------------------------------------------------------------------------


def test_a_registered_output_gets_its_events_in_a_real_run(csv_alerts, tmp_path):
    """`python -m app ... --csv-alerts PATH` (in this process, where the output is registered): every alert of the
    event log is a row, and nothing else is."""
    (tmp_path / "alerts.toml").write_text(ALERTS)
    log, table = tmp_path / "events.jsonl", tmp_path / "alerts.csv"
    code = main(
        ["--stream", f"door={video(16)}", "--model", "tiny", "--no-realtime", "--every", "8", "--budget", "256",
         "--window", "16", "--max-new-tokens", "8", "--quiet", "--config", str(tmp_path / "alerts.toml"),
         "--csv-alerts", str(table), "--log-jsonl", str(log), "--timeline", ""]
    )  # fmt: skip
    assert code == 0
    alerts = [e for e in read_log(log) if isinstance(e, Alert)]
    assert alerts and alerts[0].state == "begin"  # threshold 0: on at the first check
    assert any(isinstance(e, Answer) for e in read_log(log))  # answers were made, and the CSV did not want them
    assert rows(table) == [(a.id, a.state) for a in alerts]


def test_a_head_only_output_runs_on_the_head_of_a_fleet_once(csv_alerts, tmp_path, monkeypatch, shared_ray_cluster):
    """A real Ray cluster of two host nodes (the session's: tests/support/ray_cluster.py), the head in this process
    (`start_head`, as `python -m app --ray` runs it): the hosts' alerts reach the CSV once each, written on the head;
    the hosts' config carries no CSV output (their process does not even know the kind: were it sent there, no host
    would start)."""
    import fleet.cluster
    from fleet.head import start_head

    cluster = shared_ray_cluster  # skips the test where ray is not installed
    monkeypatch.setattr(fleet.cluster, "NAMESPACE", cluster.namespace)  # the head joins a fresh namespace
    table = tmp_path / "alerts.csv"
    args = parse_args(
        ["--ray", cluster.address, "--model", "tiny", "--every", "0", "--loop", "--stream", f"door={video(16)}",
         "--timeline", "", "--csv-alerts", str(table)]
    )  # fmt: skip
    args.alert_tables = {"busy": {"question": "Is anything there?", "every": 2.0, "threshold": 0.0, "on_after": 1}}
    config = AppConfig.from_args(args)
    alerts: list[Alert] = []
    began = threading.Event()

    def record(event: Event) -> None:  # the head's bus, on the publishing thread
        if isinstance(event, Alert):
            alerts.append(event)
            began.set()

    head = start_head(config, displays=[record])
    try:
        assert head.coordinator is not None and head.coordinator.pool.config.outputs == {}
        assert began.wait(180), "no alert from the host within 180 s"
    finally:
        head.close()  # the hosts stop first: their alerts' ends reach the head's outputs
    assert alerts and rows(table) == [(a.id, a.state) for a in alerts]
