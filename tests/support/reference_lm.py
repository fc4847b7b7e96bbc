"""The reference LM (SmolLM2-135M-Instruct, see quality/reference.py) loaded once per test process.

Tests that use it skip when it is not set up (`python scripts/setup_reference.py`), and fail instead
under EDGE_ASSISTANT_REQUIRE_TOOLS=1 (CI). Tests must not modify the shared model.
"""

from __future__ import annotations

import os
from functools import cache

import pytest

from quality.lm import TextLM, load_text_lm
from quality.reference import ReferenceMissing, load_text


@cache
def _load() -> TextLM:
    return load_text_lm()


def reference_lm() -> TextLM:
    try:
        return _load()
    except ReferenceMissing as e:
        if os.environ.get("EDGE_ASSISTANT_REQUIRE_TOOLS") == "1":
            pytest.fail(str(e))
        pytest.skip(str(e))


def reference_text(name: str = "paradise-lost") -> str:
    reference_lm()  # skips or fails the same way when the reference is not set up
    return load_text(name)
