"""A flag's default is its config dataclass's: the flags are generated from the dataclass fields
(app/config_flags.py), so the default, the type, the choices and the help are written once. Every generated flag
is also a --config key whose value reaches the dataclass."""

import argparse
import dataclasses
import json
import logging
import subprocess
import sys

import pytest

from app.cli import build_parser, parse_args
from app.config import AppConfig
from app.config_flags import add_config_flags, default_of, dest_of, flag_fields, flag_of, help_of, type_of, values_from
from app.fleet_config import FleetConfig
from app.run_limits import RunLimits
from bus.input_limits import InputLimits
from cache.config import POSITION_MODES, CacheConfig
from cache.policies import POLICIES, InfMllmSettings, StreamingLlmSettings, settings_classes
from capture.config import CaptureConfig
from model.change import ChangeConfig
from model.config import ModelConfig
from model.session_config import SessionConfig
from tests.support.app_helpers import REPO
from timeline.config import TimelineConfig
from ui.config import UIConfig
from watches.scheduler import StandingQuestion

# every component config class with generated flags, and where its instance sits in the AppConfig built from them
# (the flag-holding classes of app/flags.py: tests/app/test_config_schema.py)
GENERATED = {
    CaptureConfig: lambda config: config.streams[0].capture,
    CacheConfig: lambda config: config.cache,
    ChangeConfig: lambda config: config.session.change,
    StandingQuestion: lambda config: config.schedule,
    FleetConfig: lambda config: config.fleet,
    ModelConfig: lambda config: config.model,
    SessionConfig: lambda config: config.session,
    RunLimits: lambda config: config.limits,
    InputLimits: lambda config: config.input_limits,
    TimelineConfig: lambda config: config.timeline,
    UIConfig: lambda config: config.ui,
    **{cls: (lambda config: config.cache.policy_settings) for cls in settings_classes()},
}
FIELDS = [(cls, f) for cls in GENERATED for f in flag_fields(cls)]
IDS = [flag_of(f) for _, f in FIELDS]


def _actions() -> dict[str, argparse.Action]:
    return {a.dest: a for a in build_parser()._actions}


def test_flag_defaults_are_the_config_dataclasses_defaults():
    args = build_parser().parse_args([])
    session = SessionConfig()
    assert (args.max_new_tokens, args.chunk_size) == (session.max_new_tokens, session.chunk_size)
    assert args.every == StandingQuestion().every_s and args.positions == CacheConfig().positions
    defaults = {f.name: f.default for f in CaptureConfig.__dataclass_fields__.values()}
    assert (args.fps, args.clip_seconds) == (defaults["fps"], defaults["clip_seconds"])
    positions = next(a for a in build_parser()._actions if a.dest == "positions")
    assert tuple(positions.choices) == POSITION_MODES


def test_the_generated_flags_are_the_ones_users_know():
    """The flags and --config keys stay as they were before they were generated (users have config files)."""
    assert set(IDS) >= {
        "--fps", "--clip-seconds", "--policy", "--budget", "--window", "--positions", "--block", "--store-dir",
        "--store-quant", "--bias", "--pool", "--pool-mode", "--sinks", "--drop-unchanged", "--change-threshold",
        "--keyframe-every", "--change-floor", "--question", "--every",
    }  # fmt: skip
    assert len(IDS) == len(set(IDS)), "two config fields claim the same flag"
    assert {dest_of(f) for _, f in FIELDS} >= {"pool_mode", "store_quant", "change_threshold", "change_floor", "every"}


@pytest.mark.parametrize(("config_class", "field"), FIELDS, ids=IDS)
def test_every_generated_flag_has_its_fields_default_type_choices_and_help(config_class, field):
    action = _actions()[dest_of(field)]
    assert flag_of(field) in action.option_strings
    built = config_class(**_required(config_class))
    assert action.default == default_of(field)
    if not _no_default(field):
        assert getattr(built, field.name) == field.default
    assert action.help == help_of(field)
    if type_of(field) is bool:
        assert isinstance(action, argparse.BooleanOptionalAction if field.default else argparse._StoreTrueAction)
    else:
        assert action.type is type_of(field)
    assert action.choices == field.metadata.get("choices")
    if not _no_default(field):
        assert values_from(build_parser().parse_args([]), config_class)[field.name] == field.default


@pytest.mark.parametrize(("config_class", "field"), FIELDS, ids=IDS)
def test_every_generated_flag_is_a_config_key_that_reaches_its_dataclass(tmp_path, config_class, field):
    value = _another_value(field)
    lines = [f"{dest_of(field)} = {json.dumps(value)}"]
    timeline = str(tmp_path / "t.sqlite") if config_class is TimelineConfig else ""
    owner = next((name for name, p in POLICIES.items() if p.settings_class is config_class), None)
    if owner is not None:  # a policy's own setting reaches the dataclass when that policy is chosen
        lines.append(f"policy = {json.dumps(owner)}")
    if config_class is FleetConfig and field.name != "address":  # the fleet's settings are read with --ray only
        lines.append('ray = "auto"')
    if config_class is UIConfig:  # the page's settings are read with --ui only
        lines.append("ui = true")
        if field.name in ("allowed_hosts", "trusted_proxies"):  # a page behind a proxy needs a login, or --open
            lines.append("open = true")
    path = tmp_path / "run.toml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    args = parse_args(["--config", str(path), "--video", str(tmp_path / "a.mp4"), "--timeline", timeline])
    built = GENERATED[config_class](AppConfig.from_args(args))
    if "scale" in field.metadata:  # the flag's unit (MiB) to the field's (bytes)
        value = int(value * field.metadata["scale"])
    assert type(built) is config_class and getattr(built, field.name) == (
        tuple(value) if field.metadata.get("repeat") else value
    )


def test_a_flag_of_another_policy_is_ignored_with_a_warning(tmp_path, caplog):
    video = str(tmp_path / "a.mp4")
    with caplog.at_level(logging.WARNING, logger="app.config"):
        config = AppConfig.from_args(parse_args(["--video", video, "--timeline", "", "--sinks", "2", "--bias", "0.5"]))
    assert config.cache.policy_settings == InfMllmSettings(bias=0.5)
    assert "--sinks is a setting of streaming-llm, not of --policy inf-mllm: ignored" in caplog.text
    assert "--bias" not in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="app.config"):
        config = AppConfig.from_args(parse_args(["--video", video, "--timeline", "", "--policy", "streaming-llm"]))
    assert config.cache.policy_settings == StreamingLlmSettings() and not caplog.text  # defaults: nothing to say


def test_a_field_with_a_help_text_is_a_flag_and_one_without_is_not():
    """What adding a field to a config class does: the helper itself, on a made-up class."""

    @dataclasses.dataclass
    class Example:
        size: int = dataclasses.field(default=3, metadata={"help": "how many"})
        mode: str = dataclasses.field(default="a", metadata={"help": "which", "choices": ("a", "b")})
        on: bool = dataclasses.field(default=True, metadata={"help": "whether", "flag": "--example-on"})
        hidden: float = 0.5

    parser = argparse.ArgumentParser()
    add_config_flags(parser, Example)
    args = parser.parse_args(["--size", "4", "--mode", "b", "--no-example-on"])
    assert Example(**values_from(args, Example)) == Example(size=4, mode="b", on=False)
    assert values_from(parser.parse_args([]), Example) == {"size": 3, "mode": "a", "on": True}
    assert "--hidden" not in parser.format_help()
    with pytest.raises(SystemExit):
        parser.parse_args(["--mode", "c"])


def test_help_loads_no_transformers():
    code = "import sys, app.cli; app.cli.build_parser().format_help(); print('transformers' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.stdout.strip() == "False", done.stderr[-2000:]


def _required(config_class: type) -> dict:
    """Values for the fields that have no default (CaptureConfig's source, FleetConfig's address)."""
    values = {"address": "auto"}  # FleetConfig's
    return {f.name: values.get(f.name, "a.mp4") for f in dataclasses.fields(config_class) if f.init and _no_default(f)}


def _no_default(field: dataclasses.Field) -> bool:
    return field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING


OTHER = {
    "--device": "cpu",
    "--dtype": "float32",
    "--ray": "127.0.0.1:6379",
    "--allowed-host": ["box.lan"],
    "--trusted-proxy": ["192.168.1.2"],
}


def _another_value(field: dataclasses.Field) -> object:
    """A valid value other than the default: the next choice, the other bool, a bit more of a number."""
    if flag_of(field) in OTHER:
        return OTHER[flag_of(field)]
    if "choices" in field.metadata:
        return next(c for c in field.metadata["choices"] if c != field.default)
    kind = type_of(field)
    if kind is bool:
        return not field.default
    if kind is int:
        return field.default + 1
    if kind is float:
        default = default_of(field)
        return default * 1.5 if default else 0.5
    return f"{field.default} (changed)" if field.default else "changed"
