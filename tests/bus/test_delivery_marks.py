"""bus/delivery_marks.py: what each output delivered, kept on disk across runs of a fleet's head."""

import stat

import pytest

from bus import delivery_marks
from bus.delivery_marks import FILE_NAME, DeliveryMarks, output_id

SECRET_HOOK = "webhook https://hooks.example/hook/token-s3cret"


def test_marks_survive_a_new_run_per_output(tmp_path):
    marks = DeliveryMarks(tmp_path / "head")
    marks.add(SECRET_HOOK, "spool-a:1")
    marks.add("mqtt mqtt://127.0.0.1:1883 edge-assistant", "spool-a:2")
    marks.close()
    again = DeliveryMarks(tmp_path / "head")  # the next head, after a kill: only the file is left
    assert again.has(SECRET_HOOK, "spool-a:1") and not again.has(SECRET_HOOK, "spool-a:2")
    assert again.has("mqtt mqtt://127.0.0.1:1883 edge-assistant", "spool-a:2")
    assert not again.has("mqtt mqtt://127.0.0.1:1883 other-prefix", "spool-a:2")  # another output, its own marks
    again.close()


def test_the_file_is_private_and_never_holds_an_outputs_name(tmp_path):
    marks = DeliveryMarks(tmp_path / "head")
    marks.add(SECRET_HOOK, "spool-a:1")
    marks.close()
    path = tmp_path / "head" / FILE_NAME
    text = path.read_text()
    assert "s3cret" not in text and "hooks.example" not in text and output_id(SECRET_HOOK) in text
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700


def test_a_torn_last_line_is_no_mark(tmp_path):
    """A head killed mid-write leaves a line without its newline: "x:1" of "x:12" must not mark x:1."""
    folder = tmp_path / "head"
    folder.mkdir(mode=0o700)
    ident = output_id(SECRET_HOOK)
    (folder / FILE_NAME).write_text(f"{ident} x:5\n{ident} x:1")
    marks = DeliveryMarks(folder)
    assert marks.has(SECRET_HOOK, "x:5") and not marks.has(SECRET_HOOK, "x:1")
    marks.add(SECRET_HOOK, "x:12")  # appended after the torn piece: still read back whole
    marks.close()
    again = DeliveryMarks(folder)
    assert again.has(SECRET_HOOK, "x:12") and again.has(SECRET_HOOK, "x:5") and not again.has(SECRET_HOOK, "x:1")
    again.close()


def test_only_the_newest_keys_are_kept_and_the_file_stays_bounded(tmp_path):
    marks = DeliveryMarks(tmp_path / "head", keep=10)
    for seq in range(1, 101):
        marks.add(SECRET_HOOK, f"s:{seq}")
    marks.close()
    lines = (tmp_path / "head" / FILE_NAME).read_text().splitlines()
    assert len(lines) <= 2 * 10
    again = DeliveryMarks(tmp_path / "head", keep=10)
    assert [again.has(SECRET_HOOK, f"s:{seq}") for seq in (90, 91, 100)] == [False, True, True]
    again.close()
    with pytest.raises(ValueError, match="keep must be at least 1"):
        DeliveryMarks(tmp_path / "other", keep=0)


def test_a_mark_after_close_is_logged_not_raised(tmp_path, caplog):
    """A broker's late PUBACK may come on paho's thread after the head closed its marks: no exception there."""
    marks = DeliveryMarks(tmp_path / "head")
    marks.close()
    marks.add(SECRET_HOOK, "late:1")
    assert "a delivery mark was not written" in caplog.text


def test_a_hostile_file_is_read_back_bounded(tmp_path, monkeypatch):
    """A planted file of 40,000 outputs' ids (2 million once took 1.28 GB), keys of a megabyte and a mark of a real
    output at its end: what is read back is at most MAX_OUTPUTS outputs from the file's last MAX_BYTES (made small
    here), the long key is skipped, and the newest real mark still counts."""
    monkeypatch.setattr(delivery_marks, "MAX_BYTES", 1 << 20)
    real = output_id("mqtt broker")
    lines = [f"{i:016x} k{i}\n" for i in range(40_000)] + [f"{real} {'x' * 1_000_000}\n", f"{real} s:7\n"]
    (tmp_path / FILE_NAME).write_text("".join(lines))
    marks = DeliveryMarks(tmp_path)
    try:
        assert len(marks._marks) <= delivery_marks.MAX_OUTPUTS
        assert marks.has("mqtt broker", "s:7") and not marks.has("mqtt broker", "x" * 1_000_000)
    finally:
        marks.close()
