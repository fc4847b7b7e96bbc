"""The tests mirror the rooms: every test file sits in the folder of the room it tests (tests/cache/ for cache/,
tests/fleet/ for fleet/, ...), helpers in tests/support/, whole-tree checks in tests/project/; no test is
left at the top of tests/, where a maintainer would not look for it."""

from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
ROOT = TESTS.parent
NOT_ROOMS = {"support", "project", "data", "fixtures", "ui_browser", "scripts", "jetson", "__pycache__"}


def test_no_test_file_is_left_at_the_top_of_tests():
    assert not sorted(p.name for p in TESTS.glob("test_*.py"))


def test_every_test_folder_is_a_room_of_the_project():
    folders = [p for p in TESTS.rglob("*") if p.is_dir() and "node_modules" not in p.parts]
    rooms = [p.relative_to(TESTS) for p in folders if p.relative_to(TESTS).parts[0] not in NOT_ROOMS]
    assert rooms and all((ROOT / room).is_dir() for room in rooms if room.name != "__pycache__"), rooms
    for special in ("scripts", "jetson"):  # the two rooms that are folders of files, not packages
        assert (ROOT / special).is_dir() and (TESTS / special).is_dir()


def test_helpers_live_in_support_and_hold_no_tests():
    helpers = sorted(p.name for p in (TESTS / "support").glob("*.py") if p.name != "__init__.py")
    assert "app_helpers.py" in helpers and not [name for name in helpers if name.startswith("test_")]
