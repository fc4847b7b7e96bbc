"""Bad clips and questions raise a clear ValueError and leave the session exactly as it was."""

import numpy as np
import pytest

from cache.config import CacheConfig
from model.session import SessionConfig, StreamingSession
from tests.support.model_fixtures import random_frames
from tests.support.session_helpers import TINY_FAMILIES, loaded


def _state(session):
    layer = session.cache.kv_layers[0]
    return (
        session.cache.get_seq_length(),
        session.cache.next_position,
        session.rounds,
        session.clips,
        None if layer.keys is None else layer.keys.clone(),
    )


def _same(a, b):
    return a[:4] == b[:4] and (a[4] is None and b[4] is None or a[4].equal(b[4]))


@pytest.mark.parametrize("family", TINY_FAMILIES)
def test_bad_input_changes_nothing(family):
    session = StreamingSession(loaded(family), CacheConfig(budget=96, window=8), SessionConfig(max_new_tokens=8))
    session.ingest_clip(random_frames(4), 0.0, 4.0)
    list(session.ask("What is there?"))
    before = _state(session)
    bad_calls = [
        (lambda: session.ingest_clip(np.zeros((0, 48, 64, 3), np.uint8), 4.0, 8.0), "empty clip"),
        (lambda: session.ingest_clip(random_frames(4).astype(np.float32), 4.0, 8.0), "must be uint8"),
        (lambda: session.ingest_clip(random_frames(4)[..., :2], 4.0, 8.0), r"shape \[F, H, W, 3\]"),
        (lambda: session.ingest_clip(random_frames(4)[0], 4.0, 8.0), r"got shape \(48, 64, 3\)"),
        (lambda: session.ingest_clip(random_frames(4), 8.0, 4.0), "before its start"),
        (lambda: session.ask(""), "non-empty"),
        (lambda: session.ask("   \n"), "non-empty"),
        (lambda: session.ask("why " * 200), "at most .* fit in the cache budget"),
    ]
    for call, message in bad_calls:
        with pytest.raises(ValueError, match=message):
            call()
        assert _same(_state(session), before)
    list(session.ask("Still there?"))  # and it keeps working
    assert session.rounds == 2


def test_budget_must_leave_room_for_the_answer_and_the_window():
    with pytest.raises(ValueError, match="must exceed max_new_tokens"):
        StreamingSession(loaded("tiny-qwen2-vl"), CacheConfig(budget=64, window=32), SessionConfig(max_new_tokens=32))
    with pytest.raises(ValueError, match="max_new_tokens must be >= 1"):
        SessionConfig(max_new_tokens=0)
