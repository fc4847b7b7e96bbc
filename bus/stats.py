"""What the model session measures of a clip and of an answer, and the moments an answer drew on: one frozen
dataclass each, made once where the figures are measured (`model.session`) and carried whole by the events
(`ClipEvent.stats`, `Answer.stats`). The record codec (`bus.records`) flattens them into the event's record
under the names records always had, and rebuilds them when a record is read.

A field with `metadata={"record": False}` stays out of records (for benchmarks only); `metadata={"digits": n}`
is how many decimals its record keeps.
"""

from __future__ import annotations

from dataclasses import dataclass, field

NOT_RECORDED = {"record": False}


@dataclass(frozen=True, kw_only=True)
class EvidenceSpan:
    """A moment an answer drew on: stream seconds [start, end) of `stream`, where it came from (source: recall,
    attention, timeline) and how strongly (score: tokens recalled, attention share, a timeline note's rank).
    row_id: the timeline row of a note (source timeline); None otherwise."""

    stream: str | None = None
    start: float
    end: float
    source: str
    score: float = 0.0
    row_id: int | None = None


@dataclass(frozen=True, kw_only=True)
class ClipStats:
    """What a clip brought to a stream's cache (tokens, bytes, seconds), after its eviction point.

    visual_tokens: what the whole clip brings; visual_tokens_kept: of those, the ones that entered the cache (the
    rest did not change); visual_tokens_changed: those whose region changed (0: nothing moved; with dropping off
    every token counts as changed). None where a record of an older log does not say."""

    frames: int = 0
    visual_tokens: int | None = None
    visual_tokens_kept: int | None = None
    visual_tokens_changed: int | None = None
    keyframe: bool = False  # the clip entered whole (first clip, after a reconnect, every keyframe_every clips)
    prefill_tokens: int = 0
    cache_tokens: int = 0
    evict_ms: float = field(default=0.0, metadata={"digits": 3})
    prefill_s: float = field(default=0.0, metadata={"digits": 4})
    kv_bytes: int = 0
    store_tokens: int = 0  # host store (tier 2), after this clip
    store_bytes: int = 0
    store_dropped_tokens: int = 0  # pushed out of the store by its byte bound, so far
    store_oldest_time: float | None = None  # stream second of the oldest clip the store still holds
    vision_s: float = field(default=0.0, metadata=NOT_RECORDED)  # vision tower + embedding, part of prefill_s


@dataclass(frozen=True, kw_only=True)
class AnswerStats:
    """A finished round as the session measured it: the question and answer, token counts, seconds, bytes.

    cache_tokens_before: cache + question tokens, what the eviction saw; cache_tokens_after: after the question's
    eviction point, before decoding; cache_tokens_end: after the answer was added. ttft_s: from the question to
    its first answer token; recall_ms: search and copy from the host store, part of ttft_s. evidence: the moments
    drawn on (model/evidence.py; the app adds the stream's name and the timeline notes it cited)."""

    round: int
    question: str = ""
    answer: str = ""
    answer_tokens: int = 0
    prefill_tokens: int = 0
    ttft_s: float = 0.0
    decode_tokens_per_s: float = 0.0
    cache_tokens_before: int = 0
    cache_tokens_after: int = 0
    cache_tokens_end: int = 0
    evict_ms: float = 0.0
    kv_bytes: int = 0
    device_mem_bytes: int | None = None
    process_rss_bytes: int | None = None
    cut_off: bool = False  # a stop request ended the answer early
    recalled_tokens: int = 0  # brought back from the host store for this answer
    recall_ms: float = 0.0
    store_tokens: int = 0  # held by the host store after this answer
    store_bytes: int = 0
    evidence: tuple[EvidenceSpan, ...] = ()
