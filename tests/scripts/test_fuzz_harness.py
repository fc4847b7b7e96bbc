"""scripts/fuzz_capture.py's harness tells each way a case can end: a result, an unhandled exception, a
signal, the time limit, the memory limit; and its real target decodes a good file to a clean end."""

import os
import signal
import time
from pathlib import Path

import pytest

from scripts.fuzz_capture import _address_space_bytes, decode_file, run_case

DATA = Path(__file__).parents[1] / "data" / "fuzz"


def raises(path: Path) -> dict:
    raise KeyError(str(path))


def segfaults(path: Path) -> dict:
    os.kill(os.getpid(), signal.SIGSEGV)
    return {}


def hangs(path: Path) -> dict:
    time.sleep(600)
    return {}


def allocates(path: Path) -> dict:
    return {"outcome": "end", "size": len(bytearray(8 * 2**30))}


@pytest.mark.parametrize(
    ("target", "outcome"),
    [
        (raises, "unhandled:builtins.KeyError"),
        (segfaults, "crash:SIGSEGV"),
        (hangs, "hang"),
        (allocates, "memory-limit"),
    ],
)
def test_each_way_a_case_can_go_wrong_is_named(target, outcome):
    limit = _address_space_bytes() + 512 * 2**20
    assert run_case(DATA / "empty.mp4", 2.0, limit, target=target).outcome == outcome


def test_the_real_target_in_a_child():
    limit = _address_space_bytes() + 1024 * 2**20
    result = run_case(DATA / "bad-utf8-metadata.mov", 60.0, limit)
    assert (result.outcome, result.detail["frames"]) == ("end", 4) and result.peak_rss_mib > 0
    assert decode_file(DATA / "empty.mp4")["outcome"] == "error-at-open"
