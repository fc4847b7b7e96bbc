"""Terminal output: answers streamed as they are generated, framed by their round and metrics."""

from __future__ import annotations

import sys
from collections.abc import Iterable
from typing import TextIO

from bus import (
    Alert,
    Answer,
    AnswerPiece,
    AnswerStart,
    CaptureChange,
    ClipEvent,
    End,
    ErrorEvent,
    Event,
    EvidenceSpan,
    Status,
    WarningEvent,
)
from bus.clock import merge_evidence
from bus.text_safety import printable


def _mib(n: int | None) -> str:
    if n is None:
        return "n/a"
    return f"{n / 2**10:.0f} KiB" if n < 2**20 else f"{n / 2**20:.0f} MiB"


def _moments(evidence: Iterable[EvidenceSpan]) -> str:
    """Evidence as stream-time spans per source, adjacent clips merged: 00:00:16-00:00:32 (recall), ..."""
    return ", ".join(span.label for span in merge_evidence(evidence))


def kept_share(event: ClipEvent) -> str:
    """`kept 12% (61/512)`: the share of a clip's visual tokens that entered the cache (dropping unchanged ones);
    empty when the event does not say (dropping off in an older log)."""
    full, kept = event.stats.visual_tokens, event.stats.visual_tokens_kept
    if full is None or kept is None:
        return ""
    share = f"{100 * kept / full:.0f}%" if full else "-"
    return f"kept {share} ({kept}/{full})" + (", key frame" if event.stats.keyframe else "")


class TerminalPrinter:
    """Subscribes to the assistant's events and prints them. Clip progress goes to `status_out`. Everything
    printed passes `printable` first: questions, answers, stream names and messages carry text from people,
    the model and the sources, and a terminal must never act on an escape sequence among it."""

    def __init__(
        self,
        out: TextIO | None = None,
        status_out: TextIO | None = None,
        show_clips: bool = True,
        prefix_streams: bool = False,
    ) -> None:
        # None: the streams of the moment it is made (not of the module's import: a caller may have replaced them)
        self.out = sys.stdout if out is None else out
        self.status_out = sys.stderr if status_out is None else status_out
        self.show_clips = show_clips
        # several streams: every line starts with the stream's name, and answers (whose pieces interleave when
        # decoded together) are printed whole when done instead of piece by piece
        self.prefix_streams = prefix_streams
        self._prefix = ""

    def __call__(self, event: Event) -> None:
        self._prefix = f"[{event.stream}] " if self.prefix_streams and event.stream else ""
        match event:
            case AnswerStart():
                tag = "auto" if event.auto else "you"
                when = f"t={event.stream_time:.1f}s"
                self._print(f"\n{self._prefix}── round {event.round} · {when} · {tag}: {event.question}")
            case AnswerPiece() if not self.prefix_streams:
                self.out.write(printable(event.text))
                self.out.flush()
            case Answer():
                self._answer(event)
            case ClipEvent() if self.show_clips:
                self._clip(event)
            case ErrorEvent():
                self._status(f"! error ({event.where}): {event.message}")
            case Alert():
                if event.began:
                    line = f"▲ ALERT {event.alert} began at t={event.stream_time:.1f}s (p_yes {event.p_yes:.2f})"
                else:
                    duration = event.duration_s or 0.0
                    line = f"▼ alert {event.alert} ended at t={event.stream_time:.1f}s after {duration:.1f}s"
                    line += f" ({event.reason})" if event.reason else ""
                self._print(self._prefix + line)
            case WarningEvent():
                self._status(f"! warning ({event.where}): {event.message}")
            case Status() | CaptureChange():
                self._status(f"· {event.message}")
            case End():
                self._status(f"· end of stream: {event.message}")

    def _answer(self, event: Answer) -> None:
        if self.prefix_streams:
            self._print(self._prefix + event.answer.replace("\n", "\n" + self._prefix))
        stats = event.stats
        if stats.device_mem_bytes is not None:
            memory = _mib(stats.device_mem_bytes)
        else:
            memory = f"RSS {_mib(stats.process_rss_bytes)}"
        cut = "\n   (cut off: the assistant is stopping)" if stats.cut_off else ""
        if stats.store_tokens:
            cut += (
                f"\n   recalled {stats.recalled_tokens} tokens in {stats.recall_ms:.0f} ms from the host "
                f"store ({stats.store_tokens} tokens, {_mib(stats.store_bytes)})"
            )
        if stats.evidence:
            cut += f"\n   seen at {_moments(stats.evidence)}"
        self._print(
            f"{cut}\n   ttft {stats.ttft_s:.2f}s · {stats.decode_tokens_per_s:.1f} tok/s · "
            f"cache {stats.cache_tokens_before} -> {stats.cache_tokens_after} tokens "
            f"(evict {stats.evict_ms:.1f} ms) · KV {_mib(stats.kv_bytes)} · memory {memory}"
        )

    def _clip(self, event: ClipEvent) -> None:
        dropped = f", {event.dropped_clips} clips dropped" if event.dropped_clips else ""
        lag = f", {event.lag_s:.1f} s behind" if event.lag_s >= 1.0 else ""
        kept = kept_share(event)
        kept = f", {kept}" if kept else ""
        self._status(
            f"· clip {event.index} [{event.t_start:.1f}-{event.stream_time:.1f}s] "
            f"{event.stats.frames} frames{kept}, cache {event.stats.cache_tokens}/{event.budget} tokens{dropped}{lag}"
        )

    def _print(self, line: str) -> None:
        print(printable(line), file=self.out, flush=True)

    def _status(self, line: str) -> None:
        print(printable(self._prefix + line), file=self.status_out, flush=True)
