"""A flag's default is its config dataclass's: the parser reads them from there (or, where importing the
dataclass would make --help load transformers, this test keeps the two equal)."""

import subprocess
import sys

from app.cli import build_parser
from app.scheduler import StandingQuestion
from cache.config import POSITION_MODES, CacheConfig
from capture.config import CaptureConfig
from model.session import SessionConfig
from tests.app_helpers import REPO


def test_flag_defaults_are_the_config_dataclasses_defaults():
    args = build_parser().parse_args([])
    session = SessionConfig()
    assert (args.max_new_tokens, args.chunk_size) == (session.max_new_tokens, session.chunk_size)
    assert args.every == StandingQuestion().every_s and args.positions == CacheConfig().positions
    defaults = {f.name: f.default for f in CaptureConfig.__dataclass_fields__.values()}
    assert (args.fps, args.clip_seconds) == (defaults["fps"], defaults["clip_seconds"])
    positions = next(a for a in build_parser()._actions if a.dest == "positions")
    assert tuple(positions.choices) == POSITION_MODES


def test_help_loads_no_transformers():
    code = "import sys, app.cli; app.cli.build_parser().format_help(); print('transformers' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.stdout.strip() == "False", done.stderr[-2000:]
