"""A --config TOML value checked against the command-line option it sets: the same type the flag takes, or a
ValueError naming the setting, the type expected and the value given (never a traceback later on)."""

from __future__ import annotations

import argparse
import math
from pathlib import Path

_KINDS = {int: "a whole number", float: "a number", str: "a string", Path: "a path (a string)"}
_EXAMPLES = {int: "2048", float: "1.5", str: '"text"', Path: '"/path/to/file"'}


def check_value(action: argparse.Action, key: str, value: object) -> object:
    """`value` from the TOML file for the option behind `action` (its `type`, `choices`, flag or repeatable),
    converted as the option would convert it."""
    if action.nargs == 0:  # store_true, store_false, --x/--no-x
        if not isinstance(value, bool):
            raise ValueError(f"{key} must be true or false, got {_shown(value)}")
        return value
    if isinstance(action, argparse._AppendAction):  # repeatable flags: a list in TOML
        if not isinstance(value, list):
            raise ValueError(f'{key} must be a list, e.g. {key} = ["..."], got {_shown(value)}')
        return [_scalar(action, f"every item of {key}", item, example=False) for item in value]
    return _scalar(action, key, value)


def _scalar(action: argparse.Action, key: str, value: object, example: bool = True) -> object:
    kind = action.type if action.type in _KINDS else str
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    fits = isinstance(value, str if kind is Path else kind) and not isinstance(value, bool)
    if kind is float and fits and not math.isfinite(value):
        fits = False
    if not fits:
        hint = f" (e.g. {key} = {_EXAMPLES[kind]})" if example else ""
        raise ValueError(f"{key} must be {_KINDS[kind]}{hint}, got {_shown(value)}")
    if action.choices is not None and value not in action.choices:
        allowed = ", ".join(str(c) for c in action.choices)
        raise ValueError(f"{key} must be one of {allowed}; got {_shown(value)}")
    return Path(value) if kind is Path else value


def _shown(value: object) -> str:
    names = {bool: "true/false", int: "a whole number", float: "a number", str: "a string", list: "a list"}
    text = repr(value) if not isinstance(value, bool) else str(value).lower()
    if len(text) > 60:
        text = text[:57] + "..."
    return f"{text} ({names.get(type(value), 'a table' if isinstance(value, dict) else type(value).__name__)})"
