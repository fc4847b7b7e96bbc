"""/api/v1/history/day.png in process: the API's real routes over a real timeline (SQLite and PostgreSQL) written
here; the PNG decodes at the size its layout says, a pixel inside a watch's on interval is the watch's colour and
one outside is not; the refusals are those of /api/v1/history/summary."""

from __future__ import annotations

import io
import time

import pytest
from PIL import Image

from app.front_door import TimelineHistory
from tests.api.test_api_history_period import HEADERS, T0, client_for
from tests.api.test_api_history_period import ROWS as PERIOD_ROWS
from timeline import TimelineConfig, TimelineReader
from timeline.day_picture import COLOURS, DEFAULT_WIDTH, layout
from timeline.period import Period
from timeline.store import TimelineStore

ROUTE = "/api/v1/history/day.png"


@pytest.fixture
def http(timeline_location):
    store = TimelineStore(TimelineConfig(timeline_location))
    store.write(PERIOD_ROWS)  # door: person on 100..160 and 300..310; answers at 10, 20, 30; yard down 200..230
    store.close()
    with client_for(TimelineHistory(timeline_location, keep_days=1.0)) as client:
        client.location = timeline_location
        yield client


def picture(reply) -> Image.Image:
    assert reply.status_code == 200, reply.text
    assert reply.headers["content-type"] == "image/png"
    return Image.open(io.BytesIO(reply.content)).convert("RGB")


def test_the_png_decodes_at_its_size_and_shows_when_the_watch_was_on(http):
    since, until = T0, T0 + 900
    image = picture(http.get(ROUTE, params={"since": f"{since}", "until": f"{until}"}, headers=HEADERS))
    with TimelineReader(http.location) as reader:
        result = reader.day(Period(since, until))
    assert [strip.label for strip in result.strips] == ["door", "door / person", "yard"]
    where = layout(result, DEFAULT_WIDTH)
    assert image.size == (DEFAULT_WIDTH, where.height)
    y = where.row_y(1)  # the person watch's strip
    on, off = image.getpixel((round(where.x(T0 + 130)), y)), image.getpixel((round(where.x(T0 + 230)), y))
    assert on == COLOURS["on"] and off != on
    yard_y = where.row_y(2)
    assert image.getpixel((round(where.x(T0 + 215)), yard_y)) == COLOURS["gap"]
    narrow = picture(http.get(ROUTE, params={"since": f"{since}", "width": 400, "stream": "yard"}, headers=HEADERS))
    assert narrow.width == 400 and narrow.height < image.height  # one strip


def test_the_route_is_not_taken_by_a_moments_thumbnail(http):
    """/api/v1/history/{row_id}/thumbnail could never match day.png; the picture's route answers it (not a 422 for
    a row id that is not a number)."""
    reply = http.get(ROUTE, headers=HEADERS)
    assert reply.status_code == 200 and reply.content.startswith(b"\x89PNG\r\n\x1a\n")


@pytest.mark.parametrize(
    ("params", "status", "words"),
    [
        ({"since": "yesterday"}, 422, "invalid time 'yesterday': expected an age"),
        ({"since": "1h", "until": "2h"}, 422, "ends before it starts"),
        ({"since": f"{time.time() + 3600}"}, 422, "starts in the future"),
        ({"since": "3d"}, 422, "the timeline keeps 1 days (--timeline-days)"),
        ({"stream": "garage"}, 404, "no stream named 'garage', now or in the timeline; streams: door, porch, yard"),
    ],
)
def test_refusals_say_why(http, params, status, words):
    reply = http.get(ROUTE, params=params, headers=HEADERS)
    assert reply.status_code == status and words in reply.json()["detail"], reply.text


def test_a_known_stream_with_nothing_in_the_period_is_a_picture(http):
    image = picture(http.get(ROUTE, params={"stream": "porch"}, headers=HEADERS))  # running, no row yet
    assert image.width == DEFAULT_WIDTH


def test_a_width_outside_the_bounds_and_no_token_are_refused(http):
    assert http.get(ROUTE, params={"width": 5000}, headers=HEADERS).status_code == 422
    assert http.get(ROUTE).status_code == 401


def test_the_timeline_off_is_503():
    with client_for(None) as off:
        reply = off.get(ROUTE, headers=HEADERS)
    assert reply.status_code == 503 and reply.json()["detail"].startswith('the timeline is off (--timeline "")')


def test_the_schema_says_the_picture_is_a_png(http):
    schema = http.get("/api/v1/openapi.json", headers=HEADERS).json()
    operation = schema["paths"][ROUTE]["get"]
    assert "image/png" in operation["responses"]["200"]["content"]
    assert {p["name"] for p in operation["parameters"]} == {"since", "until", "stream", "width"}
    assert {"404", "422", "503"} <= set(operation["responses"])
