"""With a budget larger than the stream, the session answers exactly as transformers' generate() does."""

import pytest
import torch

from cache.config import CacheConfig
from cache.policies import POLICIES
from model.session import SessionConfig, StreamingSession
from tests.support.model_fixtures import random_frames
from tests.support.policy_behaviours import BEHAVIOURS
from tests.support.session_helpers import TINY_FAMILIES, generate_answer, loaded

MAX_NEW = 10


@pytest.mark.parametrize("policy", BEHAVIOURS)
@pytest.mark.parametrize("family", TINY_FAMILIES)
def test_answers_equal_generate_on_the_whole_conversation(family, policy):
    _check_answers_equal_generate(family, policy, compile_decode=False)


@pytest.mark.parametrize("family", TINY_FAMILIES)
def test_compiled_decoding_answers_equal_generate(family):
    session = _check_answers_equal_generate(family, "inf-mllm", compile_decode=True)
    assert session.runner.decoder.compiled  # compiling worked, so the answers came from the compiled step


def _check_answers_equal_generate(family: str, policy: str, compile_decode: bool) -> StreamingSession:
    ours = loaded(family)
    reference = loaded(family, attention="sdpa")
    config = SessionConfig(max_new_tokens=MAX_NEW, chunk_size=16, compile_decode=compile_decode)
    session = StreamingSession(ours, CacheConfig(policy=policy, budget=8192, window=8), config)
    adapter = reference.adapter
    conversation = [adapter.conversation_prefix()]
    plan = [("clip", 0), ("clip", 1), ("ask", "What is on screen?"), ("clip", 2), ("ask", "And before that?")]
    plan += [("ask", "Say more.")]
    answers = 0
    for kind, arg in plan:
        if kind == "clip":
            frames = random_frames(3 + arg, seed=arg)
            t0 = 4.0 * arg
            session.ingest_clip(frames, t0, t0 + 4.0)
            conversation.append(adapter.clip_segment(frames, t0, t0 + 4.0))
            continue
        conversation.append(adapter.question_segment(arg))
        expected = generate_answer(reference, conversation, MAX_NEW)
        text = "".join(session.ask(arg))
        assert session.last_answer_ids == expected, f"round {answers + 1} differs"
        assert text == adapter.decode(expected) == session.last_answer.answer
        conversation.append(adapter.answer_segment(torch.tensor([expected])))
        answers += 1
    assert session.cache.evictions == 0
    assert session.cache.get_seq_length() == sum(s.num_tokens for s in conversation)
    return session


def test_every_policy_is_registered_for_the_session():
    assert set(POLICIES) == {"inf-mllm", "snapkv", "h2o", "streaming-llm", "window", "full", "strided"}
