"""Command-line flags and --config keys generated from config dataclass fields, so a default is written once.

A field becomes a flag when its metadata has a help text:

    threshold: float = field(default=0.06, metadata={"flag": "--change-threshold", "help": "how much ..."})

gives `--change-threshold` (type float from the annotation, default 0.06, that help) and the --config key
`change_threshold` (the flag's dest: every flag is a TOML key, app/cli.py `_read_config_file`). The field's
default is the flag's default, and `--help` shows it. Metadata keys:

- "help" (required): the help text. Fields without it are not flags (settings only scripts should touch).
- "flag": the flag, when it is not `--` + the field's name with `-` for `_` (`--every` for `every_s`).
- "dest": the argparse dest and --config key, when it is not the flag's name (`allow_source_nets` for
  `--allow-source-net`).
- "aliases": more option strings for the same flag, e.g. `("-v",)`.
- "choices": a tuple of the allowed values.
- "metavar": how the value is shown in --help, e.g. "PATH|URL".
- "unit": the unit of the flag's value ("seconds", "MiB"), shown after the default in --help.
- "scale": the field holds the flag's value times this (e.g. 2**20: the flag takes MiB, the field holds bytes);
  the flag's default is the field's divided by it.
- "type": the flag's value type when it is not the annotation's (e.g. float MiB for an int field of bytes).
- "repeat": True for a repeatable flag (`--alert A --alert B`; a list in TOML); the field is a tuple, e.g.
  `tuple[str, ...] = ()`, and the flag's value type is the tuple's item type.
- "negatable": whether a bool is a `--x/--no-x` pair; by default a bool that defaults to True is a pair and one
  that defaults to False a switch (`--x`).
- "hidden": True for a flag left out of --help (one that is only refused with a message, e.g. `--auth`).

Types come from the annotation (a string under `from __future__ import annotations`): int, float, str, bool and
`Path` (a path flag: the value becomes a `pathlib.Path`). `X | None` is an optional flag: None when it is not
given. A field without a default is a flag that is None when absent (its caller decides what absent means:
no `--ray`, no fleet).
"""

from __future__ import annotations

import argparse
import dataclasses
import re
from pathlib import Path
from typing import Any, get_args

TYPES = {"int": int, "float": float, "str": str, "bool": bool, "Path": Path}
_SEQUENCE = re.compile(r"(?:tuple|list|Tuple|List)\[([\w.]+)(?:, \.\.\.)?\]")


def flag_fields(config_class: type) -> list[dataclasses.Field]:
    """The fields of `config_class` that are flags (their metadata has "help"), in field order."""
    return [f for f in dataclasses.fields(config_class) if "help" in f.metadata]


def flag_of(field: dataclasses.Field) -> str:
    """The field's flag, e.g. `--pool-mode`."""
    return field.metadata.get("flag", "--" + field.name.replace("_", "-"))


def dest_of(field: dataclasses.Field) -> str:
    """The field's argparse dest, which is also its --config (TOML) key, e.g. `pool_mode`."""
    return field.metadata.get("dest", flag_of(field).removeprefix("--").replace("-", "_"))


def type_of(field: dataclasses.Field) -> type:
    """The type of the flag's value: int, float, str, bool or Path (a repeatable flag: of each value)."""
    if "type" in field.metadata:
        return field.metadata["type"]
    name = _annotation_name(field)
    if name not in TYPES:
        raise TypeError(f"{field.name}: a flag needs an int, float, str, bool or Path field, got {field.type!r}")
    return TYPES[name]


def default_of(field: dataclasses.Field) -> object:
    """The flag's default: the field's (divided by "scale"; a list for a repeatable flag; None without one)."""
    if field.default is not dataclasses.MISSING:
        default = field.default
    elif field.default_factory is not dataclasses.MISSING:
        default = field.default_factory()
    else:
        return None
    if field.metadata.get("repeat") and default is not None:
        return list(default)
    if "scale" in field.metadata and default is not None:
        return type_of(field)(default / field.metadata["scale"])
    return default


def help_of(field: dataclasses.Field) -> str:
    """The help text, with the unit after the default when the field names one."""
    if field.metadata.get("hidden"):
        return argparse.SUPPRESS
    unit = field.metadata.get("unit")
    return field.metadata["help"] + (f" (default: %(default)s {unit})" if unit else "")


def add_config_flags(group: argparse._ActionsContainer, config_class: type) -> list[argparse.Action]:
    """Adds a flag to `group` for every field of `config_class` with a help text; returns the actions."""
    actions = []
    for field in flag_fields(config_class):
        kind, meta = type_of(field), field.metadata
        default = default_of(field)
        options: dict[str, Any] = {"dest": dest_of(field), "default": default, "help": help_of(field)}
        if kind is bool:
            negatable = meta.get("negatable", default is True)
            options["action"] = argparse.BooleanOptionalAction if negatable else "store_true"
        else:
            options["type"] = kind
            if meta.get("repeat"):
                options["action"] = "append"
        for key in ("choices", "metavar"):
            if key in meta:
                options[key] = meta[key]
        actions.append(group.add_argument(*meta.get("aliases", ()), flag_of(field), **options))
    return actions


def values_from(args: argparse.Namespace, config_class: type) -> dict[str, object]:
    """The flag fields' values in `args` (flags and --config keys) by field name, for `config_class(**values)`:
    a repeatable flag's values as a tuple, a scaled flag's value in the field's unit (and type)."""
    values = {}
    for field in flag_fields(config_class):
        value = getattr(args, dest_of(field))
        if value is not None and field.metadata.get("repeat"):
            value = tuple(value)
        elif value is not None and "scale" in field.metadata:
            value = TYPES[_annotation_name(field)](value * field.metadata["scale"])
        values[field.name] = value
    return values


def _annotation_name(field: dataclasses.Field) -> str:
    """`int` for `int`, `int | None`, `Optional[int]`, `tuple[int, ...]` or `pathlib.Path` -> `Path`."""
    kind = field.type
    text = (
        kind if isinstance(kind, str) else kind.__name__ if isinstance(kind, type) and not get_args(kind) else str(kind)
    )
    text = text.replace("typing.", "")
    if text.startswith("Optional[") and text.endswith("]"):
        text = text[len("Optional[") : -1]
    names = [name.strip() for name in text.split("|") if name.strip() != "None"]
    name = names[0] if len(names) == 1 else text
    if sequence := _SEQUENCE.fullmatch(name):
        name = sequence.group(1)
    return name.rsplit(".", 1)[-1]
