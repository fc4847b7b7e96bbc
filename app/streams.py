"""Which streams to watch: `--stream NAME=SOURCE` flags, `[streams.NAME]` tables of the --config file, or the
one stream of `--video` / `--camera`, whose name is derived from its source. Pure parsing, no I/O.

A name appears in event logs, terminal prefixes, MQTT topics and file names, so it is kept to what is safe in
all of them: lowercase letters, digits, `_` and `-`, starting with a letter or digit, at most 32 characters.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from pathlib import Path
from urllib.parse import urlsplit

from bus.names import check_name
from bus.redact import redact_source

TABLE_KEYS = ("source", "question", "every", "credentials_file", "node")


@dataclass(frozen=True)
class StreamSpec:
    """One stream as configured. question/every: its own standing question and interval (None: the run's).
    credentials_file: a file holding the source's `user:password` (see app/source_credentials.py).
    node: the fleet's node it must run on (--ray; fleet/nodes.py says how a node is named)."""

    name: str
    source: str | int
    question: str | None = None
    every: float | None = None
    credentials_file: str | None = None
    node: str | None = None

    def __post_init__(self) -> None:
        check_name(self.name)
        if isinstance(self.source, str) and not self.source.strip():
            raise ValueError(f"stream {self.name!r}: the source is empty")
        if not isinstance(self.source, (str, int)) or isinstance(self.source, bool) or _negative(self.source):
            raise ValueError(
                f"stream {self.name!r}: the source must be a path, a URL or a camera index >= 0, got {self.source!r}"
            )
        if self.every is not None and not (
            isinstance(self.every, (int, float)) and not isinstance(self.every, bool) and self.every >= 0
        ):
            raise ValueError(f"stream {self.name!r}: every must be a number of seconds >= 0, got {self.every!r}")
        if self.question is not None and (not isinstance(self.question, str) or not self.question.strip()):
            raise ValueError(f"stream {self.name!r}: the question must be a non-empty string")
        file = self.credentials_file
        if file is not None and (not isinstance(file, str) or not file.strip()):
            raise ValueError(f"stream {self.name!r}: credentials_file must be a file path")
        if self.node is not None and (not isinstance(self.node, str) or not self.node.strip()):
            raise ValueError(f"stream {self.name!r}: node must name a node of the fleet (its edge_node label)")


def _negative(source: str | int) -> bool:
    return isinstance(source, int) and source < 0


def parse_stream_flag(text: str) -> StreamSpec:
    """`NAME=SOURCE` (SOURCE: anything --video or --camera takes; a bare number is a camera index)."""
    name, sep, source = text.partition("=")
    if not sep or not source.strip():
        raise ValueError(f"--stream takes NAME=SOURCE (e.g. door=rtsp://camera/stream), got {redact_source(text)!r}")
    return StreamSpec(name.strip(), camera_or_path(source.strip()))


def camera_or_path(source: str) -> str | int:
    """A camera index stays a number; anything else (path, URL, gst: pipeline) is passed on as text."""
    return int(source) if source.isdigit() else source


def specs_from_table(table: object) -> list[StreamSpec]:
    """The `[streams.NAME]` tables of a --config file: `source` (required), `question`, `every`, `credentials_file`,
    `node` (the fleet)."""
    if not isinstance(table, dict):
        raise ValueError('streams in --config must be tables: [streams.NAME] with source = "..."')
    specs = []
    for name, settings in table.items():
        if not isinstance(settings, dict):
            raise ValueError(f'[streams.{name}] must be a table with source = "..."')
        unknown = sorted(set(settings) - set(TABLE_KEYS))
        if unknown:
            raise ValueError(
                f"[streams.{name}]: unknown setting(s) {', '.join(unknown)}; allowed: {', '.join(TABLE_KEYS)}"
            )
        if "source" not in settings:
            raise ValueError(f"[streams.{name}] has no source")
        source = settings["source"]
        source = camera_or_path(source) if isinstance(source, str) else source
        specs.append(
            StreamSpec(
                name,
                source,
                settings.get("question"),
                settings.get("every"),
                settings.get("credentials_file"),
                settings.get("node"),
            )
        )
    return specs


def derived_name(source: str | int) -> str:
    """A stream name for --video/--camera: `camera0`, a file's stem, a URL's host and last path part."""
    if isinstance(source, int):
        return f"camera{source}"
    if source.startswith("gst:"):
        return "camera"
    parts = urlsplit(source)
    if parts.scheme and parts.netloc:
        raw = "-".join(p for p in (parts.hostname or "", Path(parts.path).stem) if p)
    else:
        raw = Path(source).stem
    slug = re.sub(r"[^a-z0-9_-]+", "-", raw.lower()).strip("-_")[:32].strip("-_")
    return slug or "stream"


def with_credentials_files(specs: list[StreamSpec], flags: list[str]) -> list[StreamSpec]:
    """The specs with `--stream-credentials-file NAME=PATH` flags applied (a name that is not a stream, or one
    whose table names a file already, is refused)."""
    by_name = {spec.name: spec for spec in specs}
    for text in flags:
        name, sep, path = text.partition("=")
        name, path = name.strip(), path.strip()
        if not sep or not path:
            raise ValueError(f"--stream-credentials-file takes NAME=PATH, got {text!r}")
        if name not in by_name:
            raise ValueError(f"--stream-credentials-file {name}=...: no stream named {name!r} ({', '.join(by_name)})")
        if by_name[name].credentials_file is not None:
            raise ValueError(f"stream {name!r}: a credentials file is given twice")
        by_name[name] = replace(by_name[name], credentials_file=path)
    return [by_name[spec.name] for spec in specs]


def unique(specs: list[StreamSpec]) -> list[StreamSpec]:
    """The specs, refusing a name given twice."""
    seen: set[str] = set()
    for spec in specs:
        if spec.name in seen:
            raise ValueError(f"stream name {spec.name!r} is given twice: every stream needs its own name")
        seen.add(spec.name)
    return specs
