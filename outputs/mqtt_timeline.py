"""What the MQTT sink reads from the timeline, on its own thread (`outputs.timeline_reads`): each watch's day so far
(two Home Assistant sensors on `<prefix>/<stream>/<alert>/today`) and the recap commands' results.

The sink tells it when a watch's day changed (`refresh`: an alert began or ended, a watch was set); it reads the
timeline's summary of [local midnight, now) for that watch and hands the payload back to the sink, which keeps it
as a retained state of the watch (dropped if the watch ended meanwhile). At start and at each local midnight every
watch is read again.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

import outputs.discovery as topics
from bus import Event
from bus.reporting import ErrorCallback
from outputs.commands import NOT_FOUND, CommandError
from outputs.mqtt_commands import _error
from outputs.mqtt_config import MqttConfig
from outputs.payloads import to_json
from outputs.recaps import NOT_AVAILABLE, Digest, recap_reply
from outputs.timeline_reads import TimelineReads, today_payload
from timeline import TimelineConfig, TimelineError, TimelineReader
from timeline.period import Period
from timeline.recap import recap_text

logger = logging.getLogger(__name__)


class MqttTimeline:
    """The MQTT sink's timeline reads (see the module docstring).

    Args:
        config: the topics.
        timeline: the running assistant's timeline.
        pairs: the sink's (stream, alert) pairs now.
        set_pair_state: (stream, alert, topic, payload) -> keeps a watch's retained state unless the watch ended.
        publish: (topic, payload) -> a message (a recap's result).
        deliver: hands a recap asked for to the other outputs, as a `Digest` (None: nowhere else).
        on_error: told when the timeline cannot be read.
        clock: wall seconds.
    """

    def __init__(
        self,
        config: MqttConfig,
        timeline: TimelineConfig,
        pairs: Callable[[], list[tuple[str, str]]],
        set_pair_state: Callable[[str, str, str, bytes], None],
        publish: Callable[[str, bytes], None],
        deliver: Callable[[Event], None] | None = None,
        on_error: ErrorCallback | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.config = config
        self.pairs, self.set_pair_state, self.publish, self.clock = pairs, set_pair_state, publish, clock
        self.deliver = deliver
        self.name = f"mqtt {config.broker}"
        self.reads = TimelineReads(self.name, timeline, on_error, clock=clock, midnight=self.refresh_all)

    def start(self) -> None:
        self.reads.start()
        self.reads.submit(self.refresh_all)  # the watches known at start: their day so far

    def close(self, timeout: float) -> None:
        self.reads.close(timeout)

    def configs(self, stream: str, alert: str) -> list[tuple[str, dict[str, Any]]]:
        """The discovery configs of the watch's day sensors."""
        return [
            topics.today_count_config(self.config, stream, alert),
            topics.today_on_config(self.config, stream, alert),
        ]

    def refresh(self, stream: str, alert: str, row: tuple[str, str] | None = None) -> None:
        """Queues a read of the watch's day so far; `row`: (alert id, begin|end), waited for in the timeline."""

        def job(reader: TimelineReader) -> None:
            if row is not None and not self.reads.wait_for_alert(reader, *row):
                logger.warning("%s: alert %s not in the timeline yet; today's sensors read without it", self.name, row)
            self._set(reader, stream, alert)

        if not self.reads.submit(job):
            logger.warning("%s: the timeline's queue is full; today's sensors of %s/%s wait", self.name, stream, alert)

    def refresh_all(self, reader: TimelineReader) -> None:
        """Every watch's day so far (at start, and at local midnight: the day starts again)."""
        for stream, alert in self.pairs():
            self._set(reader, stream, alert)

    def queue_recap(
        self, span: Period, stream: str | None, watch: str | None, request_id: str | None, notify: bool = True
    ) -> bool:
        """A recap command (from paho's thread): read on the timeline thread, its result published from there and,
        when `notify`, delivered to the other outputs as a digest. False when the queue is full."""

        def reply(result: dict[str, Any]) -> None:
            self.publish(topics.recap_result_topic(self.config), to_json(result))

        def job(reader: TimelineReader) -> None:
            try:
                recap = reader.recap(span, stream=stream, watch=watch)
            except ValueError as err:
                reply(_error("recap", request_id, CommandError(str(err), NOT_FOUND)))
                return
            reply(recap_reply(recap, request_id))
            if notify and self.deliver is not None:
                self.deliver(Digest(recap=recap, text=recap_text(recap), scheduled=False))

        def failed(err: TimelineError) -> None:
            reply(_error("recap", request_id, CommandError(f"cannot read the timeline: {err}", NOT_AVAILABLE)))

        return self.reads.submit(job, failed)

    def _set(self, reader: TimelineReader, stream: str, alert: str) -> None:
        payload = to_json(today_payload(reader, stream, alert, self.clock()))
        self.set_pair_state(stream, alert, topics.today_topic(self.config, stream, alert), payload)
