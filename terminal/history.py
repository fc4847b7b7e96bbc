"""`python -m app history`: search the timeline (tier 3 memory) from the terminal, one moment per line or JSON;
or sum up a period (`--summary`: how many times, how long) or recap it (`--recap`: what happened), printed by
terminal/history_period.py."""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from bus.clock import clock
from bus.redact import redact_source
from bus.text_safety import BIDI_CONTROLS, printable
from terminal.history_period import recap_lines, summary_text, unknown_name
from timeline.config import DATA_ENV, TimelineError, default_timeline_path, timeline_location
from timeline.period import TIME_FORMS, Period, PeriodError, parse_time, period
from timeline.reader import Moment, TimelineReader
from timeline.summary import BUCKETS

SINCE_FORMS = "a number with s, m, h or d: 90s, 30m, 2h, 1d"
SINCE_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
SINCE = re.compile(r"(\d+(?:\.\d+)?)([smhd])")
# JSON leaves DEL, C1 controls and bidi controls raw; a terminal may act on them (bus.text_safety.BIDI_CONTROLS)
_C1 = re.compile(r"[\x7f-\x9f" + BIDI_CONTROLS + "]")


def _escape(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group()):04x}"


def parse_since(text: str) -> float:
    """Seconds in `90s`, `30m`, `2h`, `1d`; ValueError naming the allowed forms otherwise."""
    match = SINCE.fullmatch(text.strip().lower())
    if not match or float(match.group(1)) <= 0:
        raise ValueError(f"invalid --since {text!r}: expected {SINCE_FORMS}")
    return float(match.group(1)) * SINCE_UNITS[match.group(2)]


def _since(text: str) -> float:
    try:
        return parse_since(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"invalid --limit {text!r}: expected a whole number >= 1")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m app history",
        description="Search what the assistant saw: its answers, alerts and stream events (the timeline). "
        "With TEXT, moments matching any of its words come first (FTS5 bm25, recent ones boosted; on "
        'PostgreSQL, websearch syntax too: "red car" -blue); without, the newest moments come first. '
        "With --summary or --recap, a period instead: how many times each watch began and how long it was on, "
        "each stream's answers and gaps; or what happened, line by line. "
        "The timeline is only read, never created or changed.",
    )
    period_of = parser.add_mutually_exclusive_group()
    period_of.add_argument(
        "--summary",
        action="store_true",
        help="sum up a period (default: the day up to now) per watch and per stream instead of searching",
    )
    period_of.add_argument(
        "--recap",
        action="store_true",
        help="what happened in a period (default: the day up to now): alerts, runs of equal answers, gaps",
    )
    parser.add_argument(
        "text",
        nargs="*",
        metavar="TEXT",
        help="words to look for (any of them; stopwords ignored; before a TEXT starting with -, put --)",
    )
    parser.add_argument(
        "--since",
        type=_since,
        metavar="AGE",
        help=f"only moments of the last AGE: {SINCE_FORMS} (default: all; with --summary/--recap, "
        "the period starts AGE ago, default: a day before --until)",
    )
    parser.add_argument(
        "--until",
        metavar="TIME",
        help=f"with --summary/--recap: the period ends at TIME, {TIME_FORMS} (default: now)",
    )
    parser.add_argument("--stream", metavar="NAME", help="only moments of this stream (default: all)")
    parser.add_argument("--watch", metavar="NAME", help="with --summary/--recap: only this watch's alerts")
    parser.add_argument(
        "--bucket", choices=BUCKETS, help="with --summary: also per hour or day of local time (default: none)"
    )
    default = default_timeline_path()
    parser.add_argument(
        "--timeline",
        default=str(default),
        metavar="PATH|URL",
        help=f"the timeline file (default: {default}; ${DATA_ENV}/timeline.sqlite when {DATA_ENV} is set, "
        "else ~/.cache/edge-stream-assistant/timeline.sqlite), or the PostgreSQL database the boxes write: "
        "postgresql://[user@]host[:port]/dbname (password: $EDGE_ASSISTANT_TIMELINE_PASSWORD, $PGPASSWORD or "
        "--timeline-password-file)",
    )
    parser.add_argument(
        "--timeline-password-file",
        type=Path,
        metavar="FILE",
        help="the PostgreSQL password in this file's first line (mode 600)",
    )
    parser.add_argument(
        "--limit",
        type=_positive,
        default=20,
        metavar="N",
        help="at most N moments of a search (default: 20; --recap: the newest 50 lines)",
    )
    parser.add_argument(
        "--json",
        action="store_true",
        help="one JSON object per moment and line instead of text (--summary/--recap: one JSON object)",
    )
    return parser


def what(moment: Moment) -> str:
    """What was said or seen, on one line (stored text is anyone's: escape sequences and controls removed)."""
    if moment.kind == "answer":
        said = f"Q: {moment.question} A: {moment.text}"
    elif moment.kind == "alert":
        p_yes = f" (p_yes {moment.p_yes:.2f})" if moment.p_yes is not None else ""
        said = f"{moment.text}{p_yes}: {moment.question}"
    else:
        said = f"{moment.state}: {moment.text}"
    return " ".join(printable(said).split())


def json_line(moment: Moment) -> str:
    """One moment as a JSON line, its text as stored but every control character escaped."""
    return json_object(moment.to_dict())


def json_object(data: dict) -> str:
    """`data` as one JSON line, every control character escaped."""
    return _C1.sub(_escape, json.dumps(data, ensure_ascii=False))


def format_moment(moment: Moment) -> str:
    """Local wall time, stream, stream-time span, who, what."""
    wall = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(moment.t_wall))
    span = f"{clock(moment.start_s)}-{clock(moment.end_s)}"
    stream = printable(moment.stream or "-")
    return f"{wall}  {stream}  {span}  {moment.who or moment.kind}  {what(moment)}"


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    text = " ".join(args.text) or None
    span = _period_asked(parser, args)
    try:
        location = timeline_location(args.timeline, args.timeline_password_file)
    except ValueError as err:
        parser.error(redact_source(str(err)))
    if span is not None:
        return _period_main(args, location, span)
    try:
        with TimelineReader(location) as reader:
            moments = reader.search(text, since_s=args.since, stream=args.stream, limit=args.limit)
    except TimelineError as err:
        print(f"error: {redact_source(str(err))}", file=sys.stderr)
        return 2
    for moment in moments:
        if args.json:
            print(json_line(moment))
        else:
            print(format_moment(moment))
    if not moments and not args.json:
        print("no matching moments", file=sys.stderr)
    return 0


def _period_asked(parser: argparse.ArgumentParser, args: argparse.Namespace) -> Period | None:
    """The period of --summary/--recap (None: a search); exits 2 with why for a bad one or a flag out of place."""
    if not (args.summary or args.recap):
        misplaced = [flag for flag, value in (("--until", args.until), ("--watch", args.watch)) if value is not None]
        if misplaced or args.bucket is not None:
            parser.error(f"{', '.join(misplaced or ['--bucket'])}: only with --summary or --recap")
        return None
    if args.text:
        parser.error("TEXT searches the moments; --summary and --recap read a period: give one or the other")
    if args.bucket is not None and not args.summary:
        parser.error("--bucket: only with --summary")
    now = time.time()
    try:
        until = None if args.until is None else parse_time(args.until, now=now)
    except PeriodError as err:
        parser.error(f"--until: {err}")
    try:
        return period(None if args.since is None else now - args.since, until, now=now)
    except PeriodError as err:
        parser.error(str(err))


def _period_main(args: argparse.Namespace, location, span: Period) -> int:
    """Prints the summary or the recap of `span`; exit 2 for a stream or watch the timeline never held."""
    try:
        with TimelineReader(location) as reader:
            if args.summary:
                result = reader.summary(span, stream=args.stream, watch=args.watch, bucket=args.bucket)
                empty = not result.streams and not result.watches
            else:
                result = reader.recap(span, stream=args.stream, watch=args.watch)
                empty = not result.lines
            unknown = unknown_name(reader.names(), args.stream, args.watch) if empty else None
    except PeriodError as err:  # a period too long for the buckets asked
        print(f"error: {err}", file=sys.stderr)
        return 2
    except TimelineError as err:
        print(f"error: {redact_source(str(err))}", file=sys.stderr)
        return 2
    if unknown is not None:
        print(f"error: {unknown}", file=sys.stderr)
        return 2
    if args.json:
        print(json_object(result.to_dict()))
    else:
        print(summary_text(result) if args.summary else recap_lines(result))
    return 0
