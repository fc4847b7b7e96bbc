"""The streaming session: a video LLM's conversation with one stream, held in a bounded KV cache.

    session.ingest_clip(frames, t_start, t_end)   # visual tokens -> chunked prefill -> evict over budget
    for piece in session.ask("What is happening?"):  # question -> prefill -> evict -> streamed answer
        print(piece, end="")
    session.last_answer                            # bus.AnswerStats of that round

Every answer stays in the cache, so later rounds remember earlier ones. Only one thread may use a session.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np
import torch

from bus.stats import AnswerStats, ClipStats
from cache.bounded_cache import BoundedCache
from cache.config import CacheConfig
from cache.policies import POLICIES
from cache.runner import CachedRunner, PrefillInterrupted
from cache.store.recall import RecallStats, recall_for_prompt
from model.adapters.base import Segment
from model.answer_turn import AnswerTurn
from model.change import ChangeTracker
from model.evidence import ClipIndex, attended, recalled
from model.loading import LoadedModel
from model.resources import device_memory_bytes, process_rss_bytes
from model.session_config import SessionConfig
from model.verdict import Verdict, YesNo, check_question, yes_probability

logger = logging.getLogger(__name__)


@dataclass
class StreamingSession:
    """Feeds clips and questions of one stream to a loaded model through a `BoundedCache`."""

    def __init__(self, loaded: LoadedModel, cache_config: CacheConfig, config: SessionConfig | None = None):
        self.loaded = loaded
        self.adapter = loaded.adapter
        self.config = config or SessionConfig()
        self.cache_config = cache_config
        if cache_config.budget - self.config.max_new_tokens <= cache_config.window:
            raise ValueError(
                f"budget ({cache_config.budget}) must exceed max_new_tokens ({self.config.max_new_tokens}) "
                f"+ window ({cache_config.window}): the answer's headroom and the question's window must fit"
            )
        self._check_picture_fits(cache_config)
        self.cache = BoundedCache.for_model(loaded.model, cache_config)
        self.runner = CachedRunner(
            loaded.model,
            self.cache,
            position_dims=self.adapter.position_dims,
            chunk_size=self.config.chunk_size,
            compile_decode=self.config.compile_decode,
        )
        self.change = ChangeTracker(self.config.change)
        self.stop_requested: Callable[[], bool] = lambda: False  # checked between forward passes
        self._yes_no: YesNo | None = None  # the tokens of a yes/no verdict, found at the first check
        self.runner.interrupt = lambda: self.stop_requested()
        self._eos = set(self.adapter.eos_token_ids())
        self._suppressed = torch.tensor(self.adapter.suppressed_token_ids(), dtype=torch.long, device=loaded.device)
        self.reset()

    # -- public steps -------------------------------------------------------------------------------

    def reset(self) -> None:
        """Forgets the whole stream: empty cache, round counters back to zero."""
        self.cache.reset()
        self.clip_index = ClipIndex()  # token ranks -> clips, for the evidence of answers
        self.clips = 0
        self.frames = 0  # frame ids given to the cache so far (one per change-layout group: frame or temporal patch)
        self.rounds = 0
        self.last_answer: AnswerStats | None = None
        self.last_answer_ids: list[int] = []
        self._started = False
        self.change.reset()  # the next clip is a key frame
        self.grid: tuple[int, ...] | None = None  # (height, width) of the frames the cache last received, in pixels

    def _check_picture_fits(self, cache_config: CacheConfig) -> None:
        """ValueError when the pinned picture, the question's window and the answer's headroom overflow the budget."""
        if not cache_config.pin_picture or not POLICIES[cache_config.policy].evicts:
            return
        picture, budget = self.adapter.picture_tokens(), cache_config.budget
        room = budget - picture - self.config.max_new_tokens
        fix = "raise --budget (or lower --max-new-tokens, --window) or stop pinning the picture (--no-pin-picture)"
        if room <= cache_config.window:
            raise ValueError(
                f"budget ({budget}) must exceed the current picture ({picture} tokens: the largest frame of this "
                f"model, pinned) + max_new_tokens ({self.config.max_new_tokens}) + window ({cache_config.window}): "
                f"{fix}"
            )
        try:
            cache_config.policy_settings.check_fits(room, cache_config.window)
        except ValueError as error:
            raise ValueError(
                f"the current picture ({picture} tokens) and the answer's headroom ({self.config.max_new_tokens}) "
                f"leave {room} tokens of the budget ({budget}) to the policy: {error}; {fix}"
            ) from error

    def ingest_clip(self, frames: np.ndarray, t_start: float, t_end: float, whole: bool = False) -> ClipStats:
        """Adds a clip ([F, H, W, 3] uint8 RGB, stream seconds) to the cache; evicts over budget.

        With `config.change.drop_unchanged`, visual tokens of regions that did not change since the cache last
        saw them are left out (model/change.py); `whole` makes this clip a key frame (the capture reconnected)."""
        if not t_end >= t_start:
            raise ValueError(f"clip end {t_end} is before its start {t_start}")
        segment = self.adapter.clip_segment(frames, t_start, t_end)  # validates frames, touches nothing
        full = segment.num_visual_tokens
        changed, keyframe, span = full, True, (t_start, t_end)
        if self.config.change.drop_unchanged:
            segment, changed, keyframe, span = self._drop_unchanged(segment, whole, len(frames), t_start, t_end)
        if self.cache.store is not None:
            self.cache.archive_new()  # what came before keeps the time of its own clip
            self.cache.store.stream_time = span[0]  # labels this clip's tokens when they are archived
        self._start()
        grid = None if segment.view is None else tuple(segment.view.shape[1:3])
        if self.grid is not None and grid != self.grid:
            self.cache.new_grid(self.frames)  # another frame size: regions of earlier frames leave the picture
        self.grid = grid
        visual, self.frames = self.adapter.visual_ids(segment, self.frames)  # [T, 2]: frame, region per token
        started = time.perf_counter()
        first = self.cache.tokens_seen
        chunks = self.adapter.chunk_inputs(self.loaded.model, segment)  # Qwen3-VL: features per chunk (DeepStack)
        embeds = None if chunks is not None else self.adapter.segment_embeddings(self.loaded.model, segment)
        self._finish_device_work()
        vision_s = time.perf_counter() - started  # the tower's pass, either way
        try:
            self._prefill(segment, evict_to=None, embeds=embeds, chunks=chunks, visual=visual)
        except PrefillInterrupted:
            self.change.reset()  # the reference holds regions that did not reach the cache: start again whole
            raise
        if segment.num_visual_tokens:  # a clip that kept no frame shows no moment to cite
            self.clip_index.add(first, self.cache.tokens_seen, *span)
        self.clips += 1
        self._finish_device_work()
        return ClipStats(
            frames=int(len(frames)),
            visual_tokens=full,
            prefill_tokens=segment.num_tokens,
            prefill_s=time.perf_counter() - started,
            cache_tokens=self.cache.get_seq_length(),
            evict_ms=sum(s.evict_ms for s in self.runner.last_evictions),
            kv_bytes=self.cache.kv_bytes(),
            store_tokens=self.cache.store.tokens if self.cache.store else 0,
            store_bytes=self.cache.store.bytes if self.cache.store else 0,
            store_dropped_tokens=self.cache.store.dropped_tokens if self.cache.store else 0,
            store_oldest_time=self.cache.store.oldest_time if self.cache.store else None,
            visual_tokens_kept=segment.num_visual_tokens,
            visual_tokens_changed=changed,
            keyframe=keyframe,
            vision_s=vision_s,
        )

    def _drop_unchanged(
        self, segment: Segment, whole: bool, frames: int, t_start: float, t_end: float
    ) -> tuple[Segment, int, bool, tuple[float, float]]:
        """The clip with its unchanged visual tokens left out. Returns (segment, tokens whose region changed,
        key frame?, stream seconds of the frames whose tokens were kept)."""
        layout = self.adapter.change_layout()
        selection = self.change.select(segment.view, layout, keyframe=whole or self.change.keyframe_due())
        if not selection.keep.all():
            segment = self.adapter.sparse_clip(segment, selection.keep)
        kept = np.flatnonzero(selection.groups_kept())
        step = (t_end - t_start) / frames
        span = (t_start, t_end)
        if kept.size:
            first, last = int(kept[0]) * layout.group, min((int(kept[-1]) + 1) * layout.group, frames)
            span = (t_start + first * step, t_start + last * step)
        return segment, selection.changed_tokens, selection.keyframe, span

    def take_store_errors(self) -> list[str]:
        """Problems of the host store's folder since the last call (it went on in RAM), for error events."""
        return self.cache.store.take_errors() if self.cache.store else []

    def ask(self, question: str, prompt: str | None = None) -> Iterator[str]:
        """Prefills the question, evicts, and returns an iterator of answer text pieces.

        `prompt`: what the model is asked instead of the bare question (the question with notes in front);
        the round is still recorded under `question`. Bad questions raise ValueError here, before the cache
        changes. Metrics of the round are in `last_answer` once the iterator is exhausted.
        """
        segment = self.question_segment(prompt or question)
        return self._answer(question.strip(), segment)

    def fits(self, question: str) -> bool:
        """Whether a question of this text fits the cache's room (see `question_segment`)."""
        try:
            self.question_segment(question)
        except ValueError:
            return False
        return True

    def question_segment(self, question: str) -> Segment:
        """The question's segment; ValueError when it does not fit (nothing in the cache changes)."""
        segment = self.adapter.question_segment(question)
        room = self.cache_config.budget - self.config.max_new_tokens
        if segment.num_tokens > room:
            raise ValueError(
                f"the question is {segment.num_tokens} tokens; at most {room} fit in the cache budget "
                f"({self.cache_config.budget}) minus the answer's headroom ({self.config.max_new_tokens})"
            )
        return segment

    def check(self, question: str) -> Verdict:
        """A yes/no watch: p_yes of `question` over everything the stream showed, from one forward and no text
        generated; the question is taken out of the cache again, so checks never fill it (model/verdict.py).
        ValueError for a question that does not fit; the cache is unchanged then too."""
        segment = self.question_segment(check_question(question))
        self._start()
        started = time.perf_counter()
        embeds = self.adapter.segment_embeddings(self.loaded.model, segment)
        positions, _ = self.adapter.segment_position_ids(segment, self.cache.next_position)
        logits = self.runner.peek(inputs_embeds=embeds, position_ids=positions)
        if self._yes_no is None:
            self._yes_no = YesNo.of(self.adapter.tokenizer)
        p_yes = yes_probability(logits, self._yes_no)
        return Verdict(p_yes, (time.perf_counter() - started) * 1000, segment.num_tokens)

    # -- an answer, step by step (ask() runs them for one session; model.answer_together for several) ----

    def open_turn(self, question: str, segment: Segment) -> AnswerTurn:
        """Starts an answer: recalls what the question needs from the host store, prefills the question and
        evicts to leave the answer's headroom. A stop request during the prefill leaves a cut-off turn."""
        self._start()
        self.rounds += 1
        started = time.perf_counter()
        before = self.cache.get_seq_length() + segment.num_tokens
        cut_off = False
        recall = self._recall(segment)
        room = self.cache_config.budget - self.config.max_new_tokens + recall.tokens
        try:
            logits = self._prefill(segment, evict_to=room)
        except PrefillInterrupted:
            cut_off, logits = True, None
        return AnswerTurn(
            question=question,
            prefill_tokens=segment.num_tokens,
            started=started,
            cache_tokens_before=before,
            cache_tokens_after=self.cache.get_seq_length(),
            evict_ms=sum(s.evict_ms for s in self.runner.last_evictions),
            recall=recall,
            logits=logits,
            cut_off=cut_off,
            evidence=recalled(self.clip_index, list(recall.spans)) + attended(self.clip_index, self.cache.kv_layers),
        )

    def advance(self, turn: AnswerTurn) -> tuple[str, int | None]:
        """Picks the next answer token from `turn.logits`. Returns (the text it adds, the token to feed next):
        the caller puts that token through a decode step and hands the logits to `turn.feed`. None instead of
        a token: the answer is complete (end of turn, `max_new_tokens`, a stop request: `turn.done`)."""
        if turn.done:
            return "", None
        if turn.logits is None or len(turn.answer_ids) >= self.config.max_new_tokens:
            turn.done = True
            return "", None
        if turn.answer_ids and self.stop_requested():
            turn.cut_off = turn.done = True
            return "", None
        token = self._pick(turn.logits)
        turn.first_token_seen()
        if token in self._eos:
            turn.done = True
            return "", None
        turn.answer_ids.append(token)
        turn.fed_last = False
        piece, turn.text = self._new_text(turn.answer_ids, turn.text)
        if len(turn.answer_ids) >= self.config.max_new_tokens:
            turn.done = True
            return piece, None
        return piece, token

    def answer_rest(self, turn: AnswerTurn) -> str:
        """Characters held back as incomplete when the answer ended."""
        return self.adapter.tokenizer.decode(turn.answer_ids, skip_special_tokens=True)[len(turn.text) :]

    def close_turn(self, turn: AnswerTurn) -> None:
        """Puts the rest of the answer and the end-of-turn tokens into the cache; recalled tokens compete again."""
        try:
            self._close_turn(turn.answer_ids, turn.fed_last)
        finally:
            self.cache.unpin()  # recalled tokens compete again at the next eviction point

    def record_turn(self, turn: AnswerTurn) -> AnswerStats:
        """Fills `last_answer` (and `last_answer_ids`) from a closed turn."""
        decode_s = time.perf_counter() - (turn.decode_started or turn.started)
        answer_ids = turn.answer_ids
        self.last_answer_ids = answer_ids
        self.last_answer = AnswerStats(
            round=self.rounds,
            question=turn.question,
            answer=self.adapter.tokenizer.decode(answer_ids, skip_special_tokens=True),
            answer_tokens=len(answer_ids),
            prefill_tokens=turn.prefill_tokens,
            ttft_s=turn.ttft if turn.ttft is not None else time.perf_counter() - turn.started,
            decode_tokens_per_s=(len(answer_ids) / decode_s) if decode_s > 0 and answer_ids else 0.0,
            cache_tokens_before=turn.cache_tokens_before,
            cache_tokens_after=turn.cache_tokens_after,
            cache_tokens_end=self.cache.get_seq_length(),
            evict_ms=turn.evict_ms,
            kv_bytes=self.cache.kv_bytes(),
            device_mem_bytes=device_memory_bytes(self.loaded.device),
            process_rss_bytes=process_rss_bytes(),
            cut_off=turn.cut_off,
            recalled_tokens=turn.recall.tokens,
            recall_ms=turn.recall.search_ms + turn.recall.copy_ms,
            store_tokens=self.cache.store.tokens if self.cache.store else 0,
            store_bytes=self.cache.store.bytes if self.cache.store else 0,
            evidence=tuple(e.as_span() for e in turn.evidence),
        )
        return self.last_answer

    # -- steps of a round ---------------------------------------------------------------------------

    def _finish_device_work(self) -> None:
        """Waits for the GPU's queued kernels, so that a clock read next times the work, not its launch."""
        if self.loaded.device.type == "cuda":
            torch.cuda.synchronize(self.loaded.device)

    def _start(self) -> None:
        if not self._started:
            prefix = self.adapter.conversation_prefix()
            if prefix.num_tokens:
                self._prefill(prefix, evict_to=None)
            self._started = True

    def _prefill(
        self,
        segment: Segment,
        evict_to: int | None,
        embeds: torch.Tensor | None = None,
        chunks: Callable[[int, int], dict] | None = None,
        visual: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Prefills a segment at the cache's next positions; returns the last token's logits [1, vocab]. `embeds`
        ([1, T, hidden]) or `chunks` (the adapter's chunk_inputs) when the caller already ran the vision tower;
        `visual` ([T, 2]: the adapter's `visual_ids`) tells the cache each visual token's frame and region."""
        model = self.loaded.model
        positions, _ = self.adapter.segment_position_ids(segment, self.cache.next_position)
        if embeds is None and chunks is None:
            chunks = self.adapter.chunk_inputs(model, segment)  # Qwen3-VL clips: DeepStack features per chunk
        if chunks is not None:
            return self.runner.prefill(input_ids=segment.input_ids, position_ids=positions, evict_to=evict_to,
                                       chunk_inputs=chunks, visual=visual)  # fmt: skip
        if embeds is None:
            embeds = self.adapter.segment_embeddings(model, segment)  # [1, T, hidden]
        return self.runner.prefill(inputs_embeds=embeds, position_ids=positions, evict_to=evict_to, visual=visual)

    def _recall(self, segment: Segment) -> RecallStats:
        """Brings the host store's blocks that this question needs back into the cache (tier 2 -> tier 1)."""
        embeds = self.adapter.segment_embeddings(self.loaded.model, segment)
        positions, _ = self.adapter.segment_position_ids(segment, self.cache.next_position)
        return recall_for_prompt(self.runner, inputs_embeds=embeds, position_ids=positions)

    def _answer(self, question: str, segment: Segment) -> Iterator[str]:
        turn = self.open_turn(question, segment)
        try:
            while True:
                piece, token = self.advance(turn)
                if piece:
                    yield piece
                if token is None:
                    break
                turn.feed(self.runner.decode_step(token))
            rest = self.answer_rest(turn)
            if rest:
                yield rest
        finally:
            self.close_turn(turn)
        self.record_turn(turn)

    def _close_turn(self, answer_ids: list[int], fed_last: bool) -> None:
        """Puts what of the answer is not yet in the cache, plus the end-of-turn tokens, into the cache."""
        tail = answer_ids[-1:] if answer_ids and not fed_last else []
        ids = torch.cat([torch.tensor([tail], dtype=torch.long), self.adapter.answer_end_ids()], dim=1)
        self._prefill(Segment(input_ids=ids, model_inputs=self.adapter.text_model_inputs(ids), kind="answer"), None)

    def _pick(self, logits: torch.Tensor) -> int:
        """Greedy choice over [1, vocab] logits; visual placeholder tokens are never produced."""
        if self._suppressed.numel():
            logits = logits.index_fill(1, self._suppressed, float("-inf"))
        return int(logits.argmax(dim=-1))

    def _new_text(self, answer_ids: list[int], previous: str) -> tuple[str, str]:
        """The text the latest token adds (held back while it ends in an incomplete character)."""
        text = self.adapter.tokenizer.decode(answer_ids, skip_special_tokens=True)
        if text.endswith("\ufffd"):
            return "", previous
        return text[len(previous) :], text
