"""The MQTT sink: alerts, answers and availability on a broker, announced to Home Assistant.

paho-mqtt 2.x runs the connection on its own thread (`loop_start`) and reconnects by itself. This sink keeps
what the broker must hold again after a reconnect (or a broker restart that lost it):
- the retained states (`<prefix>/available`, every alert's ON/OFF state and latest snapshot, the discovery
  configs), re-published on every connect;
- the messages (events, answers: an answer is retained too) published while disconnected, in a bounded backlog
  (oldest dropped, counted), sent after the reconnect. Messages handed to paho just before it noticed a lost
  connection are re-sent by paho itself (QoS 1).

Home Assistant's entities come and go with what they show: a watch's (a binary_sensor and its snapshot image) are
announced when it is set (a `watch` event) or first alerts, and removed when it ends for good (an empty retained
payload on its configs, its state and its snapshot; at the next connect if the broker is down). An ON is held
`min_on_s` (5 s) at least: an OFF, or the removal of a watch that ended meanwhile (a one-shot ends at its first
begin), waits for that on a timer, so that a slow Home Assistant still makes the entity and sees it on; at close
what waits is published before `offline`.

An outage is reported twice, whatever its length: once when it starts (connection lost, or the broker
unreachable or refusing), and once when it ends if messages were dropped meanwhile ("N messages dropped
during the outage"); at close if it never ended. paho's network thread is supervised (`SupervisedClient`):
a crash in it is one report and a restart.

A fleet's spooled alerts and answers (events with a receipt, `bus.receipt`) carry their durable key in the
payload (`event_key`), and are held until the broker acknowledged their message (QoS 1: its PUBACK, seen in
paho's `on_publish`; QoS 0: once paho wrote it) or it was dropped: the head acknowledges them to their host only
then. A head that dies before that sends them again in its next run: at least once, the key to drop a repeat by.

With the timeline on, each watch also gets two sensors of its day so far (`<prefix>/<stream>/<alert>/today`,
retained: alerts begun since local midnight and seconds on), exact from the timeline: read on the sink's own
timeline thread (`outputs.mqtt_timeline`) after each begin and end of that watch (once the writer wrote its row)
and at local midnight; made and removed with the watch's other entities. The scheduled digest (`outputs.digest`)
is published on `<prefix>/digest`.

With `--mqtt-commands` it also takes questions, watches and recaps from the broker (`outputs.mqtt_commands`): it
subscribes to the command topics at every connect, announces a Home Assistant `text` entity per stream to ask
with, and publishes each command's result.

Topics (see `outputs.discovery`): `<prefix>/available` online/offline (retained; offline is also the
last will), `<prefix>/<stream>/<alert>/state` ON/OFF (retained), `<prefix>/<stream>/<alert>/snapshot` JPEG
(retained), `<prefix>/<stream>/events` alert begin/end JSON, `<prefix>/<stream>/answer` answer JSON (retained).
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence

import paho.mqtt.client as paho
from paho.mqtt.enums import CallbackAPIVersion
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties
from paho.mqtt.reasoncodes import ReasonCode

import outputs.discovery as topics
from bus import Alert, Answer, Event, Status, StatusKind, WatchEvent, WatchLifecycle
from bus.receipt import Receipt, delivered_before, hold, release
from bus.reporting import ErrorCallback, call_reporter
from bus.supervisor import RestartPolicy
from outputs.commands import Commands
from outputs.mqtt_client import SupervisedClient
from outputs.mqtt_commands import MqttCommands
from outputs.mqtt_config import URL_FORMS, MqttConfig, parse_mqtt_url
from outputs.mqtt_timeline import MqttTimeline
from outputs.payloads import alert_payload, answer_payload, to_json
from outputs.recaps import Digest
from outputs.registry import OutputKind, SinkContext, register
from timeline import TimelineConfig

__all__ = ["URL_FORMS", "MqttConfig", "MqttSink", "parse_mqtt_url"]

logger = logging.getLogger(__name__)

Payload = str | bytes


class MqttSink:
    """Publishes alerts and answers to an MQTT broker (see the module docstring).

    Args:
        config: the broker and topics.
        streams: the stream names; each gets an answer sensor in Home Assistant.
        alerts: stream name -> its alert names; each (stream, alert) gets a binary_sensor (and a snapshot
            image), announced and set OFF at the first connect. A pair first seen in an event (a watch set, an
            alert) is announced then.
        on_error: called with a one-line message when an outage starts (the broker cannot be reached, refuses
            the connection or the connection is lost), when it ends with messages dropped meanwhile (their
            count), and when paho's thread crashed (and restarts). Never raises into the caller.
        restarts: how paho's network thread restarts after a crash.
        commands: the running assistant, for `config.commands` (None: commands are not taken, said once).
        timeline: the running assistant's timeline, for the today sensors and recaps (None: off, none of them).
        deliver: where a recap asked for by a command goes besides its reply (the publisher: ntfy, webhooks).
        clock: wall seconds, for "today" and recap periods (tests pass their own).
    """

    def __init__(
        self,
        config: MqttConfig,
        streams: Sequence[str] = (),
        alerts: Mapping[str, Sequence[str]] | None = None,
        on_error: ErrorCallback | None = None,
        restarts: RestartPolicy | None = None,
        commands: Commands | None = None,
        timeline: TimelineConfig | None = None,
        clock: Callable[[], float] = time.time,
        deliver: Callable[[Event], None] | None = None,
    ) -> None:
        self.config = config
        self.clock = clock
        self.name = f"mqtt {config.broker}"
        self.mark_name = f"mqtt {config.broker} {config.prefix}"  # what its delivery marks name (bus.delivery_marks)
        self.repeats_skipped = 0  # replayed events it had delivered before a fleet's head restarted
        self.on_error = on_error
        self.timeline = (
            None
            if timeline is None
            else MqttTimeline(
                config, timeline, self._pairs_now, self._set_pair_state, self._publish, deliver, on_error, clock
            )
        )
        recap = self.timeline.queue_recap if self.timeline is not None else None
        self.commands = (
            MqttCommands(config, commands, on_error, timeline=timeline, recap=recap, wall=clock)
            if config.commands and commands
            else None
        )
        if config.commands and commands is None:
            call_reporter(on_error, f"{self.name}: --mqtt-commands is not available in this run; ignored")
        self._lock = threading.Lock()
        self._connected = False
        self._closing = False
        self._outage_reported = False
        self._available = True  # False after the assistant said it stopped
        self._streams: list[str] = []
        self._pairs: list[tuple[str, str]] = []
        self._retained: dict[str, Payload] = {}  # topic -> latest retained state ("": a removal, sent once)
        # (stream, alert) -> (monotonic time its ON is held until, actions waiting for then, their timer)
        self._holds: dict[tuple[str, str], tuple[float, list[Callable[[], None]], threading.Timer | None]] = {}
        self._backlog: deque[tuple[str, Payload, bool, Receipt | None]] = deque()
        self._acks = threading.Lock()  # paho's on_publish and `_track` (never held while calling paho)
        self._in_flight: dict[int, Receipt | None] = {}  # mid -> the receipt its PUBACK lets go of
        self._early: dict[int, bool] = {}  # mids paho reported before `_track` saw them -> whether the broker took it
        self._dropped = 0
        self._outage_dropped = 0  # dropped since the last successful connect (reported when the outage ends)
        self._restarts = restarts or RestartPolicy()
        for stream in streams:
            self._add_stream(stream)
        for stream, names in (alerts or {}).items():
            for alert in names:
                self._add_pair(stream, alert)
        self._client = self._make_client()

    @property
    def connected(self) -> bool:
        """Whether the broker acknowledged the current connection (as far as paho has noticed)."""
        with self._lock:
            return self._connected

    @property
    def dropped(self) -> int:
        """Messages dropped from the backlog (oldest first) while the broker was down."""
        with self._lock:
            return self._dropped

    def start(self) -> None:
        """Connects in the background; a broker that is down is retried (and reported), never raised."""
        if self.timeline is not None:
            self.timeline.start()
        connect = Properties(PacketTypes.CONNECT)
        connect.MaximumPacketSize = max_packet_bytes(self.config)  # a larger command is dropped by the broker
        self._client.connect_async(
            self.config.host, self.config.port, keepalive=self.config.keepalive_s, clean_start=True,
            properties=connect,
        )  # fmt: skip
        self._client.loop_start()

    def close(self, timeout: float) -> None:
        """Publishes `offline` (when connected, waiting up to `timeout` seconds for the broker to take it),
        disconnects and stops paho's thread."""
        self._release_holds()  # the held OFFs and removals before `offline`
        with self._lock:
            self._closing = True
            info = self._send(topics.available_topic(self.config), topics.OFFLINE, True) if self._connected else None
        if info is not None and info.rc == paho.MQTT_ERR_SUCCESS:
            try:
                info.wait_for_publish(timeout)
            except (RuntimeError, ValueError) as exc:
                logger.warning("%s: offline not published at close: %s", self.name, exc)
        if self.timeline is not None:
            self.timeline.close(timeout)
        self._client.stop_restarts()
        self._client.disconnect()
        self._client.loop_stop()
        with self._lock:
            dropped, self._outage_dropped = self._outage_dropped, 0
        if dropped:
            call_reporter(
                self.on_error, f"{self.name}: {dropped} messages dropped during the outage (not over at close)"
            )

    def handle(self, event: Event) -> None:
        """Maps one bus event to its messages; never waits on the network."""
        match event:
            case Alert(stream=str() as stream):
                self._handle_alert(event)
                if self.timeline is not None:
                    self.timeline.refresh(stream, event.alert, (event.id, "begin" if event.began else "end"))
            case Answer(stream=str() as stream) if stream:
                self._add_stream(stream, announce=True)
                if self._repeat(event):
                    return
                hold(event)  # until the broker took it
                topic = topics.answer_topic(self.config, stream)
                # retained: Home Assistant's answer sensor shows the latest answer after its own restart too
                self._publish(topic, to_json(answer_payload(event)), retain=True, receipt=event.receipt)
            case WatchEvent(stream=str() as stream, change=WatchLifecycle.SET):
                self._release_hold((stream, event.alert))  # a watch set again: what the old one held goes now
                if self._add_pair(stream, event.alert, announce=True):
                    self._set_state(topics.state_topic(self.config, stream, event.alert), topics.STATE_OFF)
                if self.timeline is not None:
                    self.timeline.refresh(stream, event.alert)
            case WatchEvent(stream=str() as stream, change=WatchLifecycle.ENDED):
                if not self._defer((stream, event.alert), lambda: self._remove_pair(stream, event.alert)):
                    self._remove_pair(stream, event.alert)
            case Status(stream=str() as stream, kind=StatusKind.STREAM_REMOVED):
                self._remove_stream(stream)
            case Digest(scheduled=True):  # a recap asked for by a command has its reply on <prefix>/recap/result
                self._publish(topics.digest_topic(self.config), to_json(event.payload()))
            case Status(stream=None, kind=StatusKind.READY | StatusKind.STOPPED as kind):
                with self._lock:
                    self._available = kind is StatusKind.READY
                available = topics.ONLINE if kind is StatusKind.READY else topics.OFFLINE
                self._set_state(topics.available_topic(self.config), available)

    def _handle_alert(self, event: Alert) -> None:
        stream, alert = event.stream, event.alert
        self._add_pair(stream, alert, announce=True)
        state_topic = topics.state_topic(self.config, stream, alert)
        if event.began:
            self._release_hold((stream, alert), run=False)  # ON again: the held OFF is moot
            self._hold_until((stream, alert), time.monotonic() + self.config.min_on_s)
            self._set_state(state_topic, topics.STATE_ON)
        elif not self._defer((stream, alert), lambda: self._set_state(state_topic, topics.STATE_OFF)):
            self._set_state(state_topic, topics.STATE_OFF)
        snapshot = event.snapshot
        if event.began and isinstance(snapshot, (bytes, bytearray)):
            self._set_state(topics.snapshot_topic(self.config, stream, alert), bytes(snapshot))
        if self._repeat(event):
            return
        hold(event)  # until the broker took its message on the events topic
        self._publish(topics.events_topic(self.config, stream), to_json(alert_payload(event)), receipt=event.receipt)

    # --- an ON held for min_on_s: its OFF and its watch's removal wait, on a timer -------------------------

    def _hold_until(self, pair: tuple[str, str], until: float) -> None:
        with self._lock:
            self._holds[pair] = (until, [], None)

    def _defer(self, pair: tuple[str, str], action: Callable[[], None]) -> bool:
        """Runs `action` when the pair's ON has been held min_on_s (True), or says it need not wait (False)."""
        with self._lock:
            held = self._holds.get(pair)
            if held is None or time.monotonic() >= held[0] or self._closing:
                return False
            until, actions, timer = held
            actions.append(action)
            if timer is None:
                timer = threading.Timer(until - time.monotonic(), self._release_hold, (pair,))
                timer.daemon = True
                timer.name = f"{self.name} hold"
                self._holds[pair] = (until, actions, timer)
                timer.start()
            return True

    def _release_hold(self, pair: tuple[str, str], run: bool = True) -> None:
        """Ends the pair's hold: its waiting actions run now (in order) unless `run` is False."""
        with self._lock:
            held = self._holds.pop(pair, None)
        if held is None:
            return
        _, actions, timer = held
        if timer is not None:
            timer.cancel()
        for action in actions if run else ():
            action()

    def _release_holds(self) -> None:
        with self._lock:
            pairs = list(self._holds)
        for pair in pairs:
            self._release_hold(pair)

    def _repeat(self, event: Event) -> bool:
        """A replayed event the broker took before the fleet's head restarted: its message is not sent again."""
        if delivered_before(event, self.mark_name):
            self.repeats_skipped += 1
            return True
        return False

    # --- bookkeeping -------------------------------------------------------------------------------------

    def _add_stream(self, stream: str, announce: bool = False) -> None:
        with self._lock:
            if stream in self._streams:
                return
            self._streams.append(stream)
            for topic in self._stream_topics(stream):
                if self._retained.get(topic) == "":
                    del self._retained[topic]  # a removal not sent yet: the stream is back
            if announce and self._connected:
                self._announce_stream(stream)

    def _add_pair(self, stream: str, alert: str, announce: bool = False) -> bool:
        """Whether (stream, alert) is new; a new pair is announced now when `announce` and connected."""
        self._add_stream(stream, announce)
        with self._lock:
            if (stream, alert) in self._pairs:
                return False
            self._pairs.append((stream, alert))
            for topic, _ in self._pair_configs(stream, alert):
                if self._retained.get(topic) == "":
                    del self._retained[topic]  # a removal not sent yet: the watch is back
            state = topics.state_topic(self.config, stream, alert)
            if self._retained.get(state, "") == "":
                self._retained[state] = topics.STATE_OFF
            if announce and self._connected:
                self._announce_pair(stream, alert)
            return True

    def _remove_pair(self, stream: str, alert: str) -> None:
        """A watch ended for good: an empty retained payload on its discovery configs (Home Assistant removes the
        entities), its state and its snapshot; now, or at the next connect."""
        with self._lock:
            if (stream, alert) in self._pairs:
                self._pairs.remove((stream, alert))
            for topic in self._pair_topics(stream, alert):
                if self._connected:
                    self._retained.pop(topic, None)
                    self._send(topic, "", True)
                else:
                    self._retained[topic] = ""

    def _remove_stream(self, stream: str) -> None:
        """A stream removed while running: its watches' entities go (as each watch's would), then its own (the
        answer sensor, the text entity to ask with) and its retained answer; now, or at the next connect."""
        for alert in [alert for s, alert in self._pairs_now() if s == stream]:
            if not self._defer((stream, alert), lambda alert=alert: self._remove_pair(stream, alert)):
                self._remove_pair(stream, alert)
        with self._lock:
            if stream in self._streams:
                self._streams.remove(stream)
            for topic in self._stream_topics(stream):
                if self._connected:
                    self._retained.pop(topic, None)
                    self._send(topic, "", True)
                else:
                    self._retained[topic] = ""

    def _stream_topics(self, stream: str) -> list[str]:
        """The retained topics of a stream itself: its discovery configs (discovery on) and its answer."""
        configs = [make(self.config, stream)[0] for make in (topics.answer_sensor_config, topics.ask_text_config)]
        return [*(configs if self.config.discovery else []), topics.answer_topic(self.config, stream)]

    def _pair_topics(self, stream: str, alert: str) -> list[str]:
        """Every retained topic of (stream, alert): its discovery configs (discovery on), state and snapshot."""
        configs = [topic for topic, _ in self._pair_configs(stream, alert)] if self.config.discovery else []
        return [
            *configs,
            topics.state_topic(self.config, stream, alert),
            topics.snapshot_topic(self.config, stream, alert),
            *([topics.today_topic(self.config, stream, alert)] if self.timeline is not None else []),
        ]

    def _pairs_now(self) -> list[tuple[str, str]]:
        with self._lock:
            return list(self._pairs)

    def _set_pair_state(self, stream: str, alert: str, topic: str, payload: Payload) -> None:
        """A retained state of (stream, alert), unless the watch ended meanwhile (its topics are cleared then)."""
        with self._lock:
            if (stream, alert) not in self._pairs:
                return
            self._retained[topic] = payload
            if self._connected:
                self._send(topic, payload, True)

    def _set_state(self, topic: str, payload: Payload) -> None:
        """A retained state: sent now when connected; only the latest of a topic is kept (in `_retained`) and
        re-published at every connect."""
        with self._lock:
            self._retained[topic] = payload
            if self._connected:
                self._send(topic, payload, True)

    def _publish(self, topic: str, payload: Payload, retain: bool = False, receipt: Receipt | None = None) -> None:
        """A message: sent now when connected, otherwise kept in the bounded backlog (the oldest dropped when full:
        counted, reported when the outage ends). retain: the broker keeps it for later subscribers too. receipt:
        held for this message, let go of once the broker took it."""
        dropped: tuple | None = None
        with self._lock:
            if self._connected:
                self._send(topic, payload, retain, receipt)
            else:
                if len(self._backlog) >= self.config.backlog:
                    dropped = self._backlog.popleft()
                    self._count_drop()
                self._backlog.append((topic, payload, retain, receipt))
        if dropped is not None:
            release(dropped[3])

    def _count_drop(self) -> None:
        """One message dropped (called with `_lock` held)."""
        self._dropped += 1
        self._outage_dropped += 1

    def _send(self, topic: str, payload: Payload, retain: bool, receipt: Receipt | None = None) -> paho.MQTTMessageInfo:
        """Hands one message to paho (called with `_lock` held); `receipt` is let go of once the broker took it,
        or now when paho refused it."""
        info = self._client.publish(topic, payload, qos=self.config.qos, retain=retain)
        if info.rc == paho.MQTT_ERR_QUEUE_SIZE:
            self._count_drop()
        kept = info.rc == paho.MQTT_ERR_SUCCESS or (info.rc == paho.MQTT_ERR_NO_CONN and self.config.qos > 0)
        if kept:  # paho sends it (again after a reconnect, QoS 1): its on_publish comes
            self._track(info.mid, receipt)
        elif receipt is not None:
            receipt.release()
        return info

    def _track(self, mid: int, receipt: Receipt | None) -> None:
        """Every message paho took is tracked until its `on_publish`, which may come before this. A mid paho
        gives again while an older message still holds it means paho let that one go (QoS 0 at a disconnect): it
        is given up on."""
        with self._acks:
            published = mid in self._early
            if published:
                taken = self._early.pop(mid)
                gone = None
            else:
                gone = self._in_flight.pop(mid, None)
                self._in_flight[mid] = receipt
        if gone is not None:
            gone.release()
        if published and receipt is not None:
            self._let_go(receipt, taken)

    def _on_publish(self, client, userdata, mid, reason_code, properties) -> None:
        """paho's thread: the broker took message `mid` (QoS 1: PUBACK; QoS 0: written); a refusal (MQTT 5's
        reason) is given up on alike."""
        taken = not getattr(reason_code, "is_failure", False)
        with self._acks:
            if mid not in self._in_flight:
                self._early[mid] = taken
                return
            receipt = self._in_flight.pop(mid)
        if receipt is not None:
            self._let_go(receipt, taken)

    def _let_go(self, receipt: Receipt, taken: bool) -> None:
        """The broker answered a message that carried `receipt`: marked delivered if it took it, released."""
        if taken:
            receipt.mark_delivered(self.mark_name)
        receipt.release()

    def _announce_stream(self, stream: str) -> None:
        if self.config.discovery:
            topic, payload = topics.answer_sensor_config(self.config, stream)
            self._send(topic, json.dumps(payload), True)
            topic, payload = topics.ask_text_config(self.config, stream)
            # with commands off, an empty config removes the text entity a run with commands left behind
            self._send(topic, json.dumps(payload) if self.commands else "", True)

    def _pair_configs(self, stream: str, alert: str) -> list[tuple[str, dict]]:
        return [
            topics.alert_sensor_config(self.config, stream, alert),
            topics.snapshot_image_config(self.config, stream, alert),
            *(self.timeline.configs(stream, alert) if self.timeline is not None else []),
        ]

    def _announce_pair(self, stream: str, alert: str) -> None:
        if self.config.discovery:
            for topic, payload in self._pair_configs(stream, alert):
                self._send(topic, json.dumps(payload), True)

    # --- paho -----------------------------------------------------------------------------------------------

    def _make_client(self) -> SupervisedClient:
        client = SupervisedClient(
            CallbackAPIVersion.VERSION2,
            client_id=self.config.client_id,
            protocol=paho.MQTTv5,  # its CONNECT can bound what the broker sends us (max_packet_bytes)
            name=self.name,
            on_error=self.on_error,
            restarts=self._restarts,
        )
        client.will_set(topics.available_topic(self.config), topics.OFFLINE, qos=1, retain=True)
        if self.config.username is not None or self.config.password is not None:
            client.username_pw_set(self.config.username, self.config.password)
        if self.config.tls:
            client.tls_set(ca_certs=str(self.config.ca_file) if self.config.ca_file else None)
        client.reconnect_delay_set(self.config.reconnect_min_s, self.config.reconnect_max_s)
        # paho's queue (QoS 1 messages not yet acknowledged) stays bounded too, with room for a whole re-publish
        # (paho refuses to change the bound once connected, so pairs first seen later share the margin)
        resync = 1 + 4 * len(self._streams) + 4 * len(self._pairs)
        client.max_queued_messages_set(2 * self.config.backlog + resync + 1024)
        client.on_connect = self._on_connect
        client.on_connect_fail = self._on_connect_fail
        client.on_disconnect = self._on_disconnect
        client.on_publish = self._on_publish
        client.on_message = self._on_message
        return client

    def _on_connect(self, client, userdata, flags, reason_code, properties) -> None:
        try:
            self._resync(reason_code)
        except Exception as exc:  # an exception raised into paho's loop would end its thread (and reconnects)
            logger.exception("%s: re-publishing after a connect failed", self.name)
            call_reporter(self.on_error, f"{self.name}: re-publishing after a connect failed: {exc}")

    def _resync(self, reason_code: ReasonCode) -> None:
        """After a connect: `online`, the discovery configs, the retained states, then the backlog."""
        if reason_code.is_failure:
            self._report_outage(f"{self.name}: the broker refused the connection ({reason_code}); retrying")
            return
        with self._lock:
            self._connected, self._outage_reported = True, False
            dropped, self._outage_dropped = self._outage_dropped, 0
            available = topics.ONLINE if self._available else topics.OFFLINE
            self._send(topics.available_topic(self.config), available, True)
            for stream in self._streams:
                self._announce_stream(stream)
            for stream, alert in self._pairs:
                self._announce_pair(stream, alert)
            for topic, payload in list(self._retained.items()):
                if topic != topics.available_topic(self.config):
                    self._send(topic, payload, True)
                    if payload == "":
                        del self._retained[topic]  # a removal is sent once
            while self._backlog:
                self._send(*self._backlog.popleft())
            if self.commands is not None:  # a clean session: subscribe again at every connect
                self._client.subscribe([(topic, 1) for topic in self.commands.subscriptions()])
        logger.info("%s: connected", self.name)
        if dropped:
            call_reporter(self.on_error, f"{self.name}: reconnected; {dropped} messages dropped during the outage")

    def _on_message(self, client, userdata, message) -> None:
        """A command (paho's thread): its result is published; nothing here waits on the model."""
        if self.commands is None:
            return
        try:
            reply = self.commands.handle(message.topic, message.payload, bool(message.retain))
        except Exception as exc:  # raised into paho's loop it would end its thread: report, keep taking commands
            logger.exception("%s: a command failed", self.name)
            call_reporter(self.on_error, f"{self.name}: a command failed: {exc.__class__.__name__}")
            return
        if reply is not None:
            self._publish(reply.topic, reply.payload)

    def _on_connect_fail(self, client, userdata) -> None:
        self._report_outage(f"{self.name}: cannot reach the broker; retrying in the background")

    def _on_disconnect(self, client, userdata, flags, reason_code, properties) -> None:
        with self._lock:
            self._connected = False
            closing = self._closing
        if not closing:
            self._report_outage(f"{self.name}: connection lost ({reason_code}); reconnecting in the background")

    def _report_outage(self, message: str) -> None:
        """Reports the first failure of an outage; the next ones are only logged until a connect succeeds."""
        with self._lock:
            first, self._outage_reported = not self._outage_reported, True
        if first:
            call_reporter(self.on_error, message)
        else:
            logger.debug("%s", message)


def max_packet_bytes(config: MqttConfig) -> int:
    """The largest MQTT packet the broker may send us (MQTT 5's Maximum Packet Size, audit T4): paho reads a
    packet whole before any check, so a 200 MB command once cost 600 MB. Four times `command_max_bytes` and room
    for the topic: a command a little too long still gets its refusal, a huge one never arrives."""
    return 4 * config.command_max_bytes + 1024


def _sink(config: MqttConfig, context: SinkContext) -> MqttSink:
    return MqttSink(
        config,
        streams=context.streams,
        alerts=context.alerts,
        on_error=context.on_error,
        commands=context.commands,
        timeline=context.timeline,
        deliver=context.deliver,
    )


register(
    OutputKind(
        "mqtt",
        MqttConfig,
        _sink,
        # Status: the assistant ready or stopped (the availability topic); WatchEvent: a watch's entities made, removed
        wants=(Alert, Answer, Status, WatchEvent, Digest),
        from_flags=MqttConfig.from_environment,  # the credentials from the environment or --mqtt-password-file
    )
)
