"""Command-line flags and --config keys generated from config dataclass fields, so a default is written once.

A field becomes a flag when its metadata has a help text:

    threshold: float = field(default=0.06, metadata={"flag": "--change-threshold", "help": "how much ..."})

gives `--change-threshold` (type float from the annotation, default 0.06, that help) and the --config key
`change_threshold` (the flag's dest: every flag is a TOML key, app/cli.py `_read_config_file`). Metadata keys:
"help" (required), "flag" (when it is not `--` + the field's name with `-` for `_`), "choices" (a tuple of the
allowed values), "metavar" (the value's name in --help), "repeat" (True: the flag may be given several times, a
list in TOML; an output's URL, one output per value). A bool field is a `--x/--no-x` pair; a `Path` field takes a
path; a field without a default gives a flag whose default is None (not given). Fields without "help" are left
to hand-written flags or to the library (flags that are not 1:1: other units, another default in the app, several
fields at once).
"""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path
from typing import Any

TYPES = {"int": int, "float": float, "str": str, "bool": bool, "Path": Path}


def flag_fields(config_class: type) -> list[dataclasses.Field]:
    """The fields of `config_class` that are flags (their metadata has "help"), in field order."""
    return [f for f in dataclasses.fields(config_class) if "help" in f.metadata]


def flag_of(field: dataclasses.Field) -> str:
    """The field's flag, e.g. `--pool-mode`."""
    return field.metadata.get("flag", "--" + field.name.replace("_", "-"))


def dest_of(field: dataclasses.Field) -> str:
    """The field's argparse dest, which is also its --config (TOML) key, e.g. `pool_mode`."""
    return flag_of(field).removeprefix("--").replace("-", "_")


def type_of(field: dataclasses.Field) -> type:
    """int, float, str, bool or Path, from the annotation (a string under `from __future__ import annotations`;
    `X | None` is X)."""
    kind = TYPES.get(field.type.removesuffix(" | None")) if isinstance(field.type, str) else field.type
    if kind not in TYPES.values():
        raise TypeError(f"{field.name}: a flag needs an int, float, str, bool or Path field, got {field.type!r}")
    return kind


def add_config_flags(group: argparse._ActionsContainer, config_class: type) -> list[argparse.Action]:
    """Adds a flag to `group` for every field of `config_class` with a help text; returns the actions."""
    actions = []
    for field in flag_fields(config_class):
        kind = type_of(field)
        default = None if field.default is dataclasses.MISSING else field.default
        options: dict[str, Any] = {"dest": dest_of(field), "default": default, "help": field.metadata["help"]}
        if kind is bool:
            options["action"] = argparse.BooleanOptionalAction
        else:
            options["type"] = kind
        if field.metadata.get("repeat"):
            options["action"] = "append"
        for key in ("choices", "metavar"):
            if key in field.metadata:
                options[key] = field.metadata[key]
        actions.append(group.add_argument(flag_of(field), **options))
    return actions


def values_from(args: argparse.Namespace, config_class: type) -> dict[str, object]:
    """The flag fields' values in `args` (flags and --config keys) by field name, for `config_class(**values)`."""
    return {field.name: getattr(args, dest_of(field)) for field in flag_fields(config_class)}
