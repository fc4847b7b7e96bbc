"""A stop request takes effect within one forward pass: between prefill chunks and between decode steps.
The answer is marked as cut off, and the cache stays consistent and usable."""

import pytest

from cache.config import CacheConfig
from cache.runner import PrefillInterrupted
from model.session import SessionConfig, StreamingSession
from tests.support.model_fixtures import random_frames
from tests.support.session_helpers import TINY_FAMILIES, loaded


def consistent(session: StreamingSession) -> bool:
    """Every layer holds the same number of tokens, each with a position below the next free one."""
    cache = session.cache
    layers = cache.kv_layers
    lengths = {layer.keys.shape[2] for layer in layers} | {layer.positions.shape[2] for layer in layers}
    return len(lengths) == 1 and cache.max_position() < cache.next_position


def session_for(family: str, chunk_size: int = 512) -> StreamingSession:
    config = SessionConfig(max_new_tokens=24, chunk_size=chunk_size)
    return StreamingSession(loaded(family), CacheConfig(budget=160, window=8), config)


@pytest.mark.parametrize("family", TINY_FAMILIES)
def test_a_stop_between_decode_steps_cuts_the_answer_off(family):
    session = session_for(family)
    session.ingest_clip(random_frames(4), 0.0, 4.0)
    stop, before_stop = [], []
    session.stop_requested = lambda: bool(stop)
    decode_step = session.runner.decode_step
    session.runner.decode_step = lambda token: (None if stop else before_stop.append(token), decode_step(token))[1]
    pieces = session.ask("What is there?")
    for _ in pieces:
        stop.append(True)  # asked right after the first piece: no further token may be decoded
    session.runner.decode_step = decode_step
    answer = session.last_answer
    # the first piece may need two tokens (a character split across tokens); none is decoded after the stop: the
    # answer holds the first token (from the question's prefill) and one per decode step before the stop
    assert answer.cut_off and answer.answer_tokens == len(before_stop) + 1
    assert consistent(session) and session.cache.get_seq_length() <= 160
    stop.clear()
    list(session.ask("And now?"))  # the session keeps working
    assert not session.last_answer.cut_off and session.rounds == 2


@pytest.mark.parametrize("family", TINY_FAMILIES)
def test_a_stop_between_prefill_chunks_keeps_the_chunks_before_it(family):
    session = session_for(family, chunk_size=16)
    session.ingest_clip(random_frames(2), 0.0, 2.0)
    before = session.cache.get_seq_length()
    session.stop_requested = lambda: True
    with pytest.raises(PrefillInterrupted):
        session.ingest_clip(random_frames(8), 2.0, 10.0)  # many chunks of 16 tokens
    assert session.cache.get_seq_length() - before == 16  # exactly the first chunk went in
    assert consistent(session)
    list(session.ask("What is there?"))  # stopped in the question's prefill (if it spans chunks) or after one token
    assert session.last_answer.cut_off and session.last_answer.answer_tokens <= 1
    assert consistent(session)
    session.stop_requested = lambda: False
    session.ingest_clip(random_frames(4), 10.0, 14.0)
    list(session.ask("And now?"))
    assert not session.last_answer.cut_off and consistent(session)
