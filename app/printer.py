"""Terminal output: answers streamed as they are generated, framed by their round and metrics."""

from __future__ import annotations

import sys
from typing import TextIO

from app.events import Event


def _mib(n: int | None) -> str:
    if n is None:
        return "n/a"
    return f"{n / 2**10:.0f} KiB" if n < 2**20 else f"{n / 2**20:.0f} MiB"


class TerminalPrinter:
    """Subscribes to the assistant's events and prints them. Clip progress goes to `status_out`."""

    def __init__(self, out: TextIO = sys.stdout, status_out: TextIO = sys.stderr, show_clips: bool = True) -> None:
        self.out = out
        self.status_out = status_out
        self.show_clips = show_clips

    def __call__(self, event: Event) -> None:
        kind = event["type"]
        if kind == "answer_start":
            tag = "auto" if event["auto"] else "you"
            self._print(f"\n── round {event['round']} · t={event['stream_time']:.1f}s · {tag}: {event['question']}")
        elif kind == "answer_piece":
            self.out.write(event["text"])
            self.out.flush()
        elif kind == "answer":
            memory = _mib(event.get("device_mem_bytes")) if event.get("device_mem_bytes") is not None else None
            memory = memory or f"RSS {_mib(event.get('process_rss_bytes'))}"
            cut = "\n   (cut off: the assistant is stopping)" if event.get("cut_off") else ""
            if event.get("store_tokens"):
                cut += (
                    f"\n   recalled {event['recalled_tokens']} tokens in {event['recall_ms']:.0f} ms from the host "
                    f"store ({event['store_tokens']} tokens, {_mib(event['store_bytes'])})"
                )
            self._print(
                f"{cut}\n   ttft {event['ttft_s']:.2f}s · {event['decode_tokens_per_s']:.1f} tok/s · "
                f"cache {event['cache_tokens_before']} -> {event['cache_tokens_after']} tokens "
                f"(evict {event['evict_ms']:.1f} ms) · KV {_mib(event['kv_bytes'])} · memory {memory}"
            )
        elif kind == "clip" and self.show_clips:
            dropped = f", {event['dropped_clips']} clips dropped" if event["dropped_clips"] else ""
            self._status(
                f"· clip {event['index']} [{event['t_start']:.1f}-{event['stream_time']:.1f}s] "
                f"{event['frames']} frames, cache {event['cache_tokens']}/{event['budget']} tokens{dropped}"
            )
        elif kind == "error":
            self._status(f"! error ({event['where']}): {event['message']}")
        elif kind in ("status", "capture"):
            self._status(f"· {event['message']}")
        elif kind == "end":
            self._status(f"· end of stream: {event['message']}")

    def _print(self, line: str) -> None:
        print(line, file=self.out, flush=True)

    def _status(self, line: str) -> None:
        print(line, file=self.status_out, flush=True)
