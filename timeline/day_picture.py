"""The day as a PNG (Pillow): a strip per stream and per watch across the period (timeline.day), time ticks in this
machine's local time, a legend. Bounded: `MIN_WIDTH`..`MAX_WIDTH` pixels wide, at most `MAX_STRIPS` strips (a last
line says how many more were not drawn), so at most about 1,000 pixels high.

Colours: a watch on is orange; a stream's answer runs alternate two blues (each change of answer starts the other
one, and a dark mark); a stream down is grey.
"""

from __future__ import annotations

import io
import time
from dataclasses import dataclass

from PIL import Image, ImageDraw, ImageFont

from timeline.day import Day

DEFAULT_WIDTH = 1200
MIN_WIDTH, MAX_WIDTH = 400, 2400
MAX_STRIPS = 40
LABEL_W = 180  # pixels left of the strips for their names
MARGIN = 16
HEADER_H = 30
ROW_H = 22
BAR_H = 14
AXIS_H = 24
LEGEND_H = 26
FONT_PX = 12

BACKGROUND = (255, 255, 255)
TRACK = (241, 245, 249)
GRID = (203, 213, 225)
INK = (30, 41, 59)
COLOURS = {
    "on": (249, 115, 22),
    "answer": ((96, 165, 250), (29, 78, 216)),
    "gap": (156, 163, 175),
    "change": (15, 23, 42),
}
LEGEND = (("on", "watch on"), ("answer", "answer (each change: the other blue)"), ("gap", "stream down"))


@dataclass(frozen=True)
class Layout:
    """Where things are in the picture: `x(t)` the column of wall time `t`, `row_y(i)` the middle of strip `i`."""

    since: float
    until: float
    width: int
    strips: int  # drawn
    more: int  # not drawn (past MAX_STRIPS)

    @property
    def height(self) -> int:
        return HEADER_H + max(self.strips, 1) * ROW_H + (ROW_H if self.more else 0) + AXIS_H + LEGEND_H

    def x(self, t: float) -> float:
        left, right = LABEL_W, self.width - MARGIN
        return left + (right - left) * (t - self.since) / max(self.until - self.since, 1e-9)

    def row_y(self, index: int) -> int:
        return HEADER_H + index * ROW_H + ROW_H // 2


def layout(result: Day, width: int = DEFAULT_WIDTH) -> Layout:
    """The picture's layout. ValueError for a width outside MIN_WIDTH..MAX_WIDTH."""
    if not MIN_WIDTH <= width <= MAX_WIDTH:
        raise ValueError(f"invalid width {width}: expected {MIN_WIDTH} to {MAX_WIDTH} pixels")
    drawn = min(len(result.strips), MAX_STRIPS)
    return Layout(result.since, result.until, width, drawn, len(result.strips) - drawn)


def day_png(result: Day, width: int = DEFAULT_WIDTH) -> bytes:
    """The PNG of `result` (see the module)."""
    where = layout(result, width)
    image = Image.new("RGB", (where.width, where.height), BACKGROUND)
    draw = ImageDraw.Draw(image)
    font = ImageFont.load_default(FONT_PX)
    title = f"{_local(result.since)} to {_local(result.until)} (local time)"
    draw.text((MARGIN, 8), title, fill=INK, font=font)
    bottom = HEADER_H + max(where.strips, 1) * ROW_H
    for t, label in result.ticks:
        x = round(where.x(t))
        draw.line([(x, HEADER_H), (x, bottom + 4)], fill=GRID)
        draw.text((x, bottom + 6), label, fill=INK, font=font, anchor="mt")
    if not result.strips:
        draw.text((LABEL_W, where.row_y(0)), "nothing in the timeline in this period", fill=INK, font=font, anchor="lm")
    for index, strip in enumerate(result.strips[:MAX_STRIPS]):
        _strip(draw, where, index, strip, font)
    if where.more:
        note = f"{where.more} more strip(s) not drawn: ask for one stream"
        draw.text((MARGIN, where.row_y(where.strips)), note, fill=INK, font=font, anchor="lm")
    _legend(draw, where.height - LEGEND_H + 6, font)
    out = io.BytesIO()
    image.save(out, format="PNG", optimize=True)
    return out.getvalue()


def _strip(draw: ImageDraw.ImageDraw, where: Layout, index: int, strip, font) -> None:
    y = where.row_y(index)
    top, bottom = y - BAR_H // 2, y + BAR_H // 2
    label = strip.label + (f" (+{strip.merged} merged)" if strip.merged else "")
    draw.text((MARGIN, y), _fit(draw, label, LABEL_W - MARGIN - 6, font), fill=INK, font=font, anchor="lm")
    draw.rectangle([LABEL_W, top, where.width - MARGIN, bottom], fill=TRACK)
    runs = 0
    for segment in strip.segments:
        left = where.x(segment.start)
        right = max(where.x(segment.end), left + 2)  # a moment is 2 pixels wide
        if segment.kind == "answer":
            colour = COLOURS["answer"][runs % 2]
            runs += 1
            draw.rectangle([round(left), top, round(right) - 1, bottom], fill=colour)
            draw.line([(round(left), top - 2), (round(left), bottom + 2)], fill=COLOURS["change"])
        else:
            shrink = 3 if segment.kind == "gap" else 0  # a gap is drawn thinner, over the answers
            draw.rectangle([round(left), top + shrink, round(right) - 1, bottom - shrink], fill=COLOURS[segment.kind])


def _legend(draw: ImageDraw.ImageDraw, y: int, font) -> None:
    x = MARGIN
    for kind, text in LEGEND:
        colour = COLOURS[kind] if kind != "answer" else COLOURS[kind][0]
        draw.rectangle([x, y, x + 14, y + 12], fill=colour)
        draw.text((x + 20, y + 6), text, fill=INK, font=font, anchor="lm")
        x += 20 + int(draw.textlength(text, font=font)) + 24


def _fit(draw: ImageDraw.ImageDraw, text: str, pixels: int, font) -> str:
    """`text` cut (with an ellipsis) to fit `pixels`."""
    if draw.textlength(text, font=font) <= pixels:
        return text
    while text and draw.textlength(text + "...", font=font) > pixels:
        text = text[:-1]
    return text + "..."


def _local(t_wall: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(t_wall))
