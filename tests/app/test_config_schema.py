"""The config dataclasses are the schema of the command line: every flag (the outputs' from the settings classes
in their registry) is generated from a field with help metadata, once, and each metadata key does what
app/config_flags.py says. The flag-holding classes of app/flags.py: each field is a flag and a --config key."""

import argparse
import dataclasses
import json
from pathlib import Path

import pytest

from app.cli import build_parser, parse_args
from app.config_flags import add_config_flags, default_of, dest_of, flag_fields, flag_of, values_from
from app.flags import (
    FLAG_CLASSES,
    FLAG_GROUPS,
    OUTPUTS,
    ApiFlags,
    PageFlags,
    RecallFlags,
    RunFlags,
    SourceFlags,
    TimelineFlags,
    WatchFlags,
)
from outputs.registry import output_kinds

OUTPUT_FLAGS = {  # made from each registered output's settings class (outputs/registry.py)
    flag_of(f) for kind in output_kinds() for f in flag_fields(kind.settings_class)
}
FLAG_HOLDERS = (SourceFlags, RecallFlags, WatchFlags, RunFlags, TimelineFlags, PageFlags, ApiFlags)
HOLDER_FIELDS = [(cls, f) for cls in FLAG_HOLDERS for f in flag_fields(cls)]


def test_every_flag_but_the_outputs_is_a_config_field():
    parser = build_parser()
    generated = {flag_of(f) for cls in FLAG_CLASSES for f in flag_fields(cls)}
    flags = {s for a in parser._actions for s in a.option_strings if s.startswith("--") and not s.startswith("--no-")}
    assert flags - generated - OUTPUT_FLAGS == {"--help"}
    assert not generated & OUTPUT_FLAGS
    assert {"--mqtt", "--webhook", "--ntfy", "--webhook-secret-file"} <= OUTPUT_FLAGS  # the registry's, as before
    outputs = next(g for g in parser._action_groups if g.title == OUTPUTS)
    assert {a.option_strings[0] for a in outputs._group_actions} == OUTPUT_FLAGS
    assert [title for title, _ in FLAG_GROUPS] == [g.title for g in parser._action_groups[2:]]


def test_no_two_fields_claim_a_flag_or_a_config_key():
    fields = [f for cls in FLAG_CLASSES for f in flag_fields(cls)]
    assert len({flag_of(f) for f in fields}) == len(fields)
    assert len({dest_of(f) for f in fields}) == len(fields)


@pytest.mark.parametrize(("holder", "field"), HOLDER_FIELDS, ids=[flag_of(f) for _, f in HOLDER_FIELDS])
def test_every_flag_holding_field_is_a_flag_and_a_config_key(tmp_path, holder, field):
    """Its default (from the field), and a value from --config reaching the dataclass in the field's type."""
    assert getattr(build_parser().parse_args([]), dest_of(field)) == default_of(field)
    assert holder(**values_from(build_parser().parse_args([]), holder)) == holder()
    value = _another(field)
    config = tmp_path / "run.toml"
    config.write_text(f"{dest_of(field)} = {json.dumps(value)}\n", encoding="utf-8")
    if field.name == "config":  # the one flag that is not a key of the file it names
        config.write_text("", encoding="utf-8")
        value = str(config)
    built = holder(**values_from(parse_args(["--config", str(config)]), holder))
    if field.metadata.get("repeat"):
        value = tuple(value)
    elif "Path" in str(field.type):
        value = Path(value)
    assert getattr(built, field.name) == value


def test_help_shows_units_and_hides_the_refused_flag():
    text = build_parser().format_help()
    assert "(default: 30.0 seconds)" in text and "(default: 256.0 MiB)" in text and "(default: 0.0 MiB)" in text
    assert "--auth " not in text and "--auth-file FILE" in text
    assert "--video PATH|URL" in text and "--ray ADDRESS" in text and "-v, --verbose" in text


def test_each_metadata_key_on_a_made_up_class():
    @dataclasses.dataclass
    class Example:
        address: str = dataclasses.field(metadata={"flag": "--to", "metavar": "HOST", "help": "where"})
        tags: tuple[str, ...] = dataclasses.field(default=(), metadata={"flag": "--tag", "repeat": True, "help": "t"})
        nets: tuple[str, ...] = dataclasses.field(
            default=(), metadata={"flag": "--net", "dest": "nets", "repeat": True, "help": "n"}
        )
        log: Path | None = dataclasses.field(default=None, metadata={"help": "a file"})
        size: int = dataclasses.field(
            default=3 * 2**20, metadata={"flag": "--size-mb", "type": float, "scale": 2**20, "unit": "MiB", "help": "s"}
        )
        on: bool = dataclasses.field(default=False, metadata={"help": "a switch"})
        colour: bool = dataclasses.field(default=False, metadata={"negatable": True, "help": "a pair"})
        loud: bool = dataclasses.field(default=False, metadata={"aliases": ("-l",), "help": "short too"})
        secret: str | None = dataclasses.field(default=None, metadata={"hidden": True, "help": "refused"})

    parser = argparse.ArgumentParser(formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    add_config_flags(parser, Example)
    empty = parser.parse_args([])
    assert (empty.to, empty.tag, empty.nets, empty.log, empty.size_mb, empty.on) == (None, [], [], None, 3.0, False)
    args = parser.parse_args(
        ["--to", "h", "--tag", "a", "--tag", "b", "--net", "n", "--log", "x.jsonl", "--size-mb", "1.5", "--on"]
        + ["--no-colour", "-l", "--secret", "s"]
    )
    assert Example(**values_from(args, Example)) == Example(
        address="h", tags=("a", "b"), nets=("n",), log=Path("x.jsonl"), size=3 * 2**19, on=True, loud=True, secret="s"
    )
    text = parser.format_help()
    assert "--to HOST" in text and "(default: 3.0 MiB)" in text and "--colour, --no-colour" in text
    assert "--secret" not in text and "-l, --loud" in text and "--on, --no-on" not in text
    with pytest.raises(SystemExit):
        parser.parse_args(["--size-mb", "lots"])


def _another(field: dataclasses.Field) -> object:
    """A value other than the default that the TOML file may give."""
    default = default_of(field)
    if field.metadata.get("repeat"):
        return ["10.0.0.0/8"]
    if isinstance(default, bool):
        return not default
    if isinstance(default, int):
        return default + 1
    return "x.toml"
