"""Fixed-camera test videos: what they show after H.264 coding, and their ground-truth boxes."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import av
import numpy as np
import pytest

from capture.synth_camera import (
    CameraVideoConfig,
    box_at,
    load_boxes,
    load_scene,
    object_box,
    render_camera_frame,
    write_boxes,
    write_camera_video,
)

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"
SMALL = dict(size=(160, 120), fps=4.0, duration_s=4.0, bitrate=200_000)


def decode(path: Path) -> list[np.ndarray]:
    with av.open(str(path)) as container:
        return [f.to_ndarray(format="rgb24").astype(np.int16) for f in container.decode(video=0)]


def test_static_camera_shows_the_photo_with_noise_and_no_change(tmp_path):
    config = CameraVideoConfig(**SMALL)
    video = tmp_path / "static.mp4"
    truth = write_camera_video(video, config)
    frames = decode(video)
    assert len(frames) == len(truth) == 16 and all(box is None for _, box in truth)
    scene = load_scene(config.scene, config.size).astype(np.int16)
    for frame in frames:
        assert np.abs(frame - scene).mean() < 12  # the photo, up to drift, noise and coding
    # a real scene, not a flat card: the photo has detail everywhere
    assert scene.std() > 30
    # sensor noise reaches the file (frames are never bit-identical), but no region changes
    diffs = [np.abs(b - a) for a, b in zip(frames, frames[1:], strict=False)]
    assert any(d.max() > 0 for d in diffs)
    assert max(d.mean() for d in diffs) < 4


def test_moving_object_is_where_its_box_says(tmp_path):
    config = CameraVideoConfig(**SMALL, object_enter_s=1.0, object_exit_s=3.0, object_size=0.4)
    video = tmp_path / "moving.mp4"
    truth = write_camera_video(video, config)
    write_boxes(video, config, truth)
    record = load_boxes(video)
    assert record["size"] == [160, 120] and len(record["frames"]) == 16
    assert box_at(record, 0.5) is None and box_at(record, 3.5) is None
    shown = [(t, tuple(box)) for t, box in truth if box is not None]
    assert [t for t, _ in shown] == [1.25, 1.5, 1.75, 2.0, 2.25, 2.5, 2.75]  # at 1.0 it is just outside
    assert box_at(record, 2.1) == object_box(config, 2.0)
    lefts = [box[0] for _, box in shown]
    assert lefts == sorted(lefts) and lefts[-1] > lefts[0]  # left to right
    static = decode(video)[0]
    for (t, (x0, y0, x1, y1)), frame in zip(shown, decode(video)[5:12], strict=True):
        inside = np.zeros(frame.shape[:2], bool)
        inside[y0:y1, x0:x1] = True
        change = np.abs(frame - static).mean(axis=2)
        assert change[inside].mean() > 25, t  # the object is in its box...
        assert change[~inside].mean() < 4, t  # ...and nowhere else


def test_flicker_and_rolling_shutter_change_brightness_not_content():
    scene = np.full((40, 64, 3), 128, np.uint8)
    rng = np.random.default_rng(0)
    base = dict(size=(64, 40), noise_sigma=0.0, drift=0.0, fps=10.0, flicker_hz=97.0)
    flicker = CameraVideoConfig(**base, flicker_depth=0.1)
    means = [render_camera_frame(flicker, scene, i / 10, rng).mean() for i in range(10)]
    assert max(means) - min(means) > 10  # 97 Hz sampled at 10 fps aliases to a visible 3 Hz swing
    banded = CameraVideoConfig(**base, flicker_depth=0.1, rolling_shutter_s=0.02)
    rows = render_camera_frame(banded, scene, 0.0, rng).mean(axis=(1, 2))
    assert rows.max() - rows.min() > 10  # rows read at different times: bands across the frame
    steady = render_camera_frame(CameraVideoConfig(**base), scene, 0.3, rng)
    assert (steady == 128).all()


@pytest.mark.parametrize(
    "bad",
    [
        dict(size=(33, 32)),
        dict(noise_sigma=-1.0),
        dict(drift=1.5),
        dict(object_enter_s=2.0),
        dict(object_enter_s=3.0, object_exit_s=1.0),
        dict(scene="lena"),
        dict(bitrate=10),
    ],
)
def test_bad_config_names_what_is_allowed(bad):
    with pytest.raises(ValueError, match="must|need|go together"):
        CameraVideoConfig(**bad)


def load_script():
    spec = importlib.util.spec_from_file_location("make_camera_video", SCRIPTS / "make_camera_video.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_make_camera_video_cli_writes_video_and_boxes(tmp_path):
    out = tmp_path / "cam.mp4"
    load_script().main(["--variant", "moving", "--out", str(out), "--duration", "3", "--size", "96x64", "--fps", "2"])
    record = load_boxes(out)
    assert [f["box"] is not None for f in record["frames"]] == [False, False, True, True, True, False]
    assert len(decode(out)) == 6


@pytest.mark.parametrize("argv", [["--size", "33x32"], ["--variant", "static", "--enter", "1"], ["--size", "x"]])
def test_make_camera_video_cli_rejects_bad_input_with_exit_2(argv, capsys):
    with pytest.raises(SystemExit) as exit_:
        load_script().parse_args(argv)
    assert exit_.value.code == 2
