"""Every output (a sink: MQTT, webhooks, ntfy, ...) as one registered thing, an `OutputKind`: its settings, the
factory of its sink, the event types it wants, and where it runs in a fleet. Each output registers itself at the
bottom of its own file (`outputs/ntfy.py` is the short example), and `outputs/__init__.py` imports that file.

What reads the registry, so that nothing else names an output:
- the command line and --config keys (`app/cli.py`): the settings' fields with `metadata={"help": ...}` are the
  flags (`app/config_flags.py`); the `switch` field's flag turns the output on, once per value when it repeats;
- `configured_outputs` (`app/config.py`): the settings of every output turned on, `AppConfig.outputs`;
- the start (`app/startup.py` `start_publisher`): no publisher when nothing is configured, else one sink per
  settings and a publisher that queues only the event types the configured outputs want (`wanted_types`);
- the fleet (`fleet/hosts.py`): head-only outputs are left out of the hosts' config (`per_host`).

A kind registered outside `outputs/` (a test's) exists in the process that registered it only: a fleet's hosts
(other processes, other boxes) know the kinds that `outputs/__init__.py` imports.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from bus import ErrorEvent, Event
from bus.reporting import ErrorCallback

if TYPE_CHECKING:
    from outputs.commands import Commands
    from outputs.publisher import Sink
    from timeline import TimelineConfig

Outputs = Mapping[str, Sequence[Any]]  # output name -> the settings of each configured output of that kind


@dataclass(frozen=True)
class SinkContext:
    """What a sink may need besides its settings. on_error: reports a one-line message (an `error` event, where:
    outputs), never raises; alerts: stream name -> the names of its watches (MQTT announces them to Home
    Assistant at start; empty on a fleet's host, whose streams come and go); commands: the running assistant for
    outputs that take commands (MQTT's `--mqtt-commands`; None where the run takes none: a fleet); timeline: the
    running assistant's timeline, for outputs that read it (MQTT's today sensors and recap command, the digest;
    None: off, or a fleet); deliver: hands an event an output made (a digest) to every output that wants it
    (the publisher's queue; never blocks)."""

    on_error: ErrorCallback
    alerts: Mapping[str, Sequence[str]] = field(default_factory=dict)
    commands: Commands | None = None
    timeline: TimelineConfig | None = None
    deliver: Callable[[Event], None] | None = None

    @property
    def streams(self) -> list[str]:
        return list(self.alerts)


@dataclass(frozen=True)
class OutputKind:
    """One kind of output.

    Args:
        name: its name in the registry and in `AppConfig.outputs`, e.g. "ntfy".
        settings_class: a frozen dataclass checked in `__post_init__`; its fields with `metadata={"help": ...}`
            are flags and --config keys (`app/config_flags.py`: "flag", "metavar", "repeat", a `Path` type).
        sink: (settings, context) -> the publisher's `Sink`; a sink that only sends is wrapped in
            `outputs.queued_sink.QueuedSink`.
        wants: the event types its sinks act on; the publisher queues nothing else. Never `ErrorEvent`: the
            publisher reports its failures as error events, which must not come back to it.
        head_only: in a fleet, run once on the head (every host's events reach it); False: on every host too.
        switch: the settings field whose flag turns the output on: not given (None), it is off; a repeated flag
            gives one output per value.
        from_flags: builds the settings from the flags' values by field name (e.g. reads a secret from a file);
            None: `settings_class(**values)`.
    """

    name: str
    settings_class: type
    sink: Callable[[Any, SinkContext], Sink]
    wants: tuple[type[Event], ...]
    head_only: bool = True
    switch: str = "url"
    from_flags: Callable[..., Any] | None = None

    def __post_init__(self) -> None:
        names = {f.name for f in dataclasses.fields(self.settings_class)}
        if self.switch not in names or "help" not in self.settings_class.__dataclass_fields__[self.switch].metadata:
            raise ValueError(f"output {self.name!r}: its switch {self.switch!r} must be a settings field with a help")
        if not self.wants or any(issubclass(ErrorEvent, kind) for kind in self.wants):
            raise ValueError(f"output {self.name!r} must want some event types, and never error events")

    def configure(self, values: Mapping[str, object]) -> list[Any]:
        """The settings of each output of this kind that `values` (flag values by field name) turn on."""
        given = values.get(self.switch)
        if given is None:
            return []
        make = self.from_flags or self.settings_class
        each = given if isinstance(given, (list, tuple)) else [given]  # a repeated flag: one output per value
        return [make(**{**values, self.switch: one}) for one in each]


OUTPUTS: dict[str, OutputKind] = {}


def register(kind: OutputKind) -> OutputKind:
    """Adds `kind` to the registry (at the bottom of its own file); ValueError when the name is taken."""
    if kind.name in OUTPUTS:
        raise ValueError(f"an output named {kind.name!r} is registered already")
    OUTPUTS[kind.name] = kind
    return kind


def output_kinds() -> list[OutputKind]:
    """Every registered output, in registration order."""
    return list(OUTPUTS.values())


def configured_outputs(values: Callable[[type], Mapping[str, object]]) -> dict[str, list[Any]]:
    """The configured outputs by kind (only those turned on). values: a settings class -> its flags' values by
    field name (`app.config_flags.values_from` on the parsed arguments)."""
    found = {kind.name: kind.configure(values(kind.settings_class)) for kind in output_kinds()}
    return {name: settings for name, settings in found.items() if settings}


def build_sinks(outputs: Outputs, context: SinkContext) -> list[Sink]:
    """One sink per configured output, in registry order. ValueError for a name no kind has in this process."""
    if unknown := [name for name in outputs if name not in OUTPUTS]:
        raise ValueError(
            f"no output named {', '.join(map(repr, unknown))} is registered in this process (the outputs a fleet's "
            "hosts know are those outputs/__init__.py imports)"
        )
    return [OUTPUTS[name].sink(settings, context) for name in outputs for settings in outputs[name]]


def wanted_types(outputs: Outputs) -> tuple[type[Event], ...]:
    """The union of the event types the configured outputs want (the publisher's filter)."""
    return tuple(dict.fromkeys(kind for name in outputs if outputs[name] for kind in OUTPUTS[name].wants))


def per_host(outputs: Outputs) -> dict[str, list[Any]]:
    """What of `outputs` runs on each host of a fleet: all but the head-only ones."""
    return {name: list(settings) for name, settings in outputs.items() if not OUTPUTS[name].head_only}
