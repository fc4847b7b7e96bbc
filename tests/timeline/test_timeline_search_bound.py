"""A history search's text is bounded (issue 39): a 1 MB quoted phrase cost PostgreSQL about 13 s of CPU per
search. Longer than `MAX_SEARCH_CHARS` is refused at once with a clear error, on both backends."""

from __future__ import annotations

import pytest

from timeline import TimelineConfig, TimelineError, TimelineReader
from timeline.store import Row, TimelineStore


@pytest.fixture
def timeline(timeline_location):
    store = TimelineStore(TimelineConfig(timeline_location))
    store.write([Row("answer", 1000.0, "door", 1.0, 2.0, "Is a truck at the door?", "Yes, a truck.", "person")])
    store.close()
    return timeline_location


@pytest.mark.parametrize("text", ['"' + "truck " * 175_000 + '"', "truck " * 200, "x" * 1001])
def test_a_long_search_is_refused(timeline, text: str) -> None:
    from timeline.query import MAX_SEARCH_CHARS

    with TimelineReader(timeline) as reader, pytest.raises(TimelineError, match="too long") as err:
        reader.search(text, now=2000.0)
    assert f"at most {MAX_SEARCH_CHARS:,}" in str(err.value)


def test_a_search_at_the_bound_still_runs(timeline) -> None:
    from timeline.query import MAX_SEARCH_CHARS

    text = ("truck " * MAX_SEARCH_CHARS)[:MAX_SEARCH_CHARS]
    with TimelineReader(timeline) as reader:
        assert [m.text for m in reader.search(text, now=2000.0)] == ["Yes, a truck."]
