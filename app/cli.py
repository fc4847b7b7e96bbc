"""`python -m app`: watch a video file, a network stream or a camera and answer questions about it."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path
from typing import TYPE_CHECKING

from app.config_file import ConfigFileError, read_config_toml
from app.config_flags import add_config_flags
from app.config_types import check_value
from app.flags import FLAG_GROUPS, OUTPUTS, RecallFlags
from outputs.registry import output_kinds

if TYPE_CHECKING:
    from app.config import AppConfig
    from app.launch import Launcher

DEFAULT_RECALL = RecallFlags.recall  # the app's --recall (the library's CacheConfig keeps recall=0)


def build_parser() -> argparse.ArgumentParser:
    """Every flag, generated from the fields of the config classes in `app.flags.FLAG_GROUPS` (their defaults,
    types, choices and help), plus the outputs' flags."""
    p = argparse.ArgumentParser(
        prog="python -m app",
        description="Edge streaming video assistant: a video LLM watches a stream with a bounded KV cache "
        "and answers questions about it, asked by you (type them, one per line) or every --every seconds. "
        "Type 'watch for: QUESTION [every 5s] [on change] [once] [for 10m] [threshold 0.7] [as NAME]' for a yes/no "
        "watch with alerts ('NAME: watch for: ...' on one stream), 'watches' to list them, 'unwatch NAME' to end one.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    for title, config_classes in FLAG_GROUPS:
        group = p.add_argument_group(title)
        for config_class in config_classes:
            add_config_flags(group, config_class)
        if title == OUTPUTS:
            _add_output_flags(group)
    p.set_defaults(stream_tables=None, alert_tables=None)  # the --config file's [streams.NAME] and [alerts.NAME]
    return p


def _add_output_flags(out: argparse._ArgumentGroup) -> None:
    """Every registered output's flags: --mqtt, --webhook, --ntfy, ... (outputs/registry.py)."""
    for kind in output_kinds():
        add_config_flags(out, kind.settings_class)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """Parses flags on top of the --config file's values. Bad input exits with code 2 and a message."""
    parser = build_parser()
    pre, _ = parser.parse_known_args(argv)
    if pre.config is not None:
        parser.set_defaults(**_read_config_file(parser, pre.config))
    return parser.parse_args(argv)


def _read_config_file(parser: argparse.ArgumentParser, path: Path) -> dict:
    try:
        values = read_config_toml(path)
    except ConfigFileError as err:
        parser.error(f"cannot read --config {path}: {err}")
    known = {a.dest: a for a in parser._actions}
    settings = {}
    for key, value in values.items():
        if key in ("streams", "alerts"):
            settings[f"{key[:-1]}_tables"] = value
            continue
        dest = key.replace("-", "_")
        if dest not in known or dest in ("help", "config"):
            parser.error(f"--config {path}: unknown setting {key!r}")
        try:
            settings[dest] = check_value(known[dest], key, value)
        except ValueError as err:
            parser.error(f"--config {path}: {err}")
    return settings


def load_config(argv: list[str] | None = None) -> AppConfig:
    """The flags and the --config file as one checked `AppConfig`, with logging set up. Bad input exits with code 2
    and a message (secrets redacted)."""
    args = parse_args(argv)
    from app.config import AppConfig  # heavy imports (torch, transformers) after --help
    from bus.redact import RedactingFormatter, redact_source

    try:
        config = AppConfig.from_args(args)
    except ValueError as err:
        build_parser().error(redact_source(str(err)))
    handler = logging.StreamHandler()  # stderr; a traceback from FFmpeg may quote a URL: redacted
    handler.setFormatter(RedactingFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s", datefmt="%H:%M:%S"))
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO, handlers=[handler])
    for noisy in ("httpx", "httpcore", "urllib3", "gradio"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    return config


def run_one_box(config: AppConfig) -> int:
    """One box: the headless API, the page or the terminal, as the config says. The fleet (`--ray`) is the
    program root's to start (app/__main__.py): it stands on this room, not in it."""
    if config.fleet is not None:
        raise ValueError("--ray runs the fleet: start it with `python -m app`, not app.cli.run_one_box")
    from app.launch import ONE_BOX

    return open_door(config, ONE_BOX)


def open_door(config: AppConfig, launcher: Launcher) -> int:
    """The front door the config asks for (--api: the headless API; --ui: the page; else the terminal), on the
    assistant `launcher` starts (app/launch.py: one box, or the fleet's head)."""
    if config.api.headless:
        from app.serve_api import serve_api

        return serve_api(config, launcher)
    if config.ui is not None:
        from app.web import serve

        return serve(config, launcher)
    from app.terminal import run_terminal

    return run_terminal(config, launcher)


def main(argv: list[str] | None = None) -> int:
    """One box from the command line (the tests' way in; `python -m app` also starts the fleet)."""
    return run_one_box(load_config(argv))
