"""Reading the `--config` TOML file, bounded: a regular file only (opened non-blocking, so a FIFO or a device
never hangs the start), at most `MAX_BYTES`, UTF-8, nested at most `MAX_DEPTH` deep. Anything else raises
`ConfigFileError` with one line saying what is wrong; the CLI turns it into exit code 2."""

from __future__ import annotations

import os
import stat
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10 (JetPack 6)
    import tomli as tomllib

MAX_BYTES = 1 << 20  # 1 MiB: a config with hundreds of streams and alerts is a few KiB
MAX_DEPTH = 32  # tables and arrays inside each other; the app's own settings go 3 deep


class ConfigFileError(ValueError):
    """The file cannot be used as a config; the message says why (never a traceback)."""


def read_config_toml(path: str | Path) -> dict:
    """The TOML document in `path`, as a dict; raises ConfigFileError (see the module docstring)."""
    text = _read_text(Path(path))
    try:
        values = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise ConfigFileError(str(err)) from None
    except RecursionError:
        raise ConfigFileError(f"nested too deeply (at most {MAX_DEPTH} levels of tables and arrays)") from None
    if _depth(values) > MAX_DEPTH:
        raise ConfigFileError(f"nested too deeply (at most {MAX_DEPTH} levels of tables and arrays)")
    return values


def _read_text(path: Path) -> str:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as err:
        raise ConfigFileError(err.strerror or str(err)) from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):  # before fdopen: a folder would raise there
        os.close(fd)
        raise ConfigFileError("not a regular file (a device, a FIFO or a folder); give a TOML file")
    with os.fdopen(fd, "rb") as file:
        data = file.read(MAX_BYTES + 1)
    if len(data) > MAX_BYTES:
        raise ConfigFileError(f"larger than {MAX_BYTES // (1 << 20)} MiB; a config file is a few KiB")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise ConfigFileError(f"not UTF-8 (byte {err.start}); save the file as UTF-8") from None


def _depth(value: object) -> int:
    """How deep tables and arrays nest in `value` (iterative: the value itself may be deep)."""
    deepest, todo = 0, [(value, 1)]
    while todo:
        item, depth = todo.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else ()
        deepest = max(deepest, depth)
        if depth > MAX_DEPTH:
            return depth
        todo.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))
    return deepest
