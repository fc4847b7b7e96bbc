"""Our calls into transformers use no argument it deprecates (issue 39): transformers 5.24 renamed a model's
`past_key_values=` to `cache=` (a FutureWarning; removal announced for 5.40). A tiny-model session (prefill of a
clip, an answer with the static decode step and with a plain forward, a yes/no check) runs with FutureWarnings
turned into errors, on every tiny family."""

from __future__ import annotations

import warnings

import pytest

from cache.config import CacheConfig
from model.session import SessionConfig, StreamingSession
from tests.support.model_fixtures import random_frames
from tests.support.session_helpers import TINY_FAMILIES, loaded


@pytest.mark.parametrize("policy", ["inf-mllm", "full"])  # static decode step / plain forward per token
@pytest.mark.parametrize("family", TINY_FAMILIES)
def test_a_session_raises_no_future_warning(family: str, policy: str) -> None:
    session = StreamingSession(
        loaded(family), CacheConfig(budget=160, window=8, policy=policy), SessionConfig(max_new_tokens=4)
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)
        session.ingest_clip(random_frames(2), 0.0, 2.0)
        answer = "".join(session.ask("What is there?"))
        session.check("Is there a person?")
    assert isinstance(answer, str)


def test_the_cache_goes_under_the_name_the_forward_takes() -> None:
    """transformers 5.5-5.23 name it `past_key_values` (requirements.txt's lower bound stays honest)."""
    from cache.forward_args import with_cache

    class Before:
        def forward(self, input_ids=None, past_key_values=None, use_cache=None): ...

    class After:
        def forward(self, input_ids=None, cache=None, use_cache=None): ...

    assert with_cache(Before(), "c") == {"past_key_values": "c"}
    assert with_cache(After(), "c") == {"cache": "c"}
