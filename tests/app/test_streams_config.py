"""Several streams configured: names, --stream flags, [streams.NAME] tables, derived names, routing typed
questions, and the memory admission arithmetic. Pure functions, plus the CLI's exit code 2 for bad input."""

import os
from dataclasses import replace

import pytest

from app.admission import (
    AdmissionError,
    CaptureShape,
    KvShape,
    ModelShape,
    StreamCost,
    check_fits,
    ingest_warning,
    stream_cost,
    stream_overhead,
)
from app.cli import parse_args
from app.config import AppConfig
from app.streams import StreamSpec, derived_name, parse_stream_flag, specs_from_table
from cache.config import CacheConfig
from terminal.stdin_questions import route
from tests.support.app_helpers import video
from tests.support.in_process_main import run_main


@pytest.mark.parametrize("name", ["door", "cam-2", "back_yard", "a", "0lobby", "x" * 32])
def test_safe_names_are_accepted(name):
    assert StreamSpec(name, "clip.mp4").name == name


@pytest.mark.parametrize("name", ["", "Door", "has space", "a/b", "a+b", "#", "-lead", "_lead", "x" * 33, "dör"])
def test_names_unsafe_in_topics_or_file_names_are_refused_saying_what_is_allowed(name):
    with pytest.raises(ValueError, match="lowercase letters, digits"):
        StreamSpec(name, "clip.mp4")


def test_stream_flags_take_any_source_and_a_camera_index():
    assert parse_stream_flag("door=rtsp://10.0.0.2/live?x=a=b") == StreamSpec("door", "rtsp://10.0.0.2/live?x=a=b")
    assert parse_stream_flag("desk=0").source == 0
    for bad in ("door", "door=", "=clip.mp4"):
        with pytest.raises(ValueError):
            parse_stream_flag(bad)


def test_tables_give_their_own_question_and_interval_and_refuse_unknown_keys():
    specs = specs_from_table(
        {"door": {"source": "a.mp4", "question": "Is the door open?", "every": 10}, "yard": {"source": "1"}}
    )
    assert specs == [StreamSpec("door", "a.mp4", "Is the door open?", 10), StreamSpec("yard", 1)]
    with pytest.raises(ValueError, match="allowed: source, question, every"):
        specs_from_table({"door": {"source": "a.mp4", "fps": 2}})
    with pytest.raises(ValueError, match="no source"):
        specs_from_table({"door": {"question": "q"}})
    with pytest.raises(ValueError, match="every"):
        specs_from_table({"door": {"source": "a.mp4", "every": -1}})


def test_derived_names_are_safe():
    assert derived_name("/videos/Front Door.MP4") == "front-door"
    assert derived_name("rtsp://cam.local:554/stream1") == "cam-local-stream1"
    assert derived_name(2) == "camera2"
    assert derived_name("gst:nvarguscamerasrc ! appsink") == "camera"
    assert derived_name("/tmp/???.mp4") == "stream"


def test_config_builds_one_stream_per_source_with_its_own_schedule(tmp_path):
    config_file = tmp_path / "run.toml"
    config_file.write_text('every = 20\n[streams.yard]\nsource = "b.mp4"\nquestion = "Any dogs?"\nevery = 5\n')
    args = parse_args(["--video", "/x/Front.mp4", "--stream", "door=a.mp4", "--config", str(config_file)])
    streams = AppConfig.from_args(args).streams
    assert [s.name for s in streams] == ["front", "door", "yard"]
    assert [(s.schedule.question, s.schedule.every_s) for s in streams][1:] == [
        ("What is happening now?", 20),
        ("Any dogs?", 5),
    ]
    assert len({id(s.schedule) for s in streams}) == 3  # each stream keeps its own due times


@pytest.mark.parametrize(
    "args, message",
    [
        (["--stream", "Door=a.mp4"], "lowercase letters"),
        (["--stream", "door=a.mp4", "--stream", "door=b.mp4"], "given twice"),
        (["--stream", "door"], "NAME=SOURCE"),
        (["--stream", "door=ftp://x/y"], "stream 'door'"),
    ],
)
def test_bad_streams_exit_2_with_what_to_do(capsys, args, message):
    code, err = run_main(capsys, *args, "--model", "tiny")
    assert code == 2 and message in err, err[-1500:]


def test_a_stream_whose_file_cannot_be_opened_exits_2_naming_it(tmp_path, capsys):
    code, err = run_main(capsys, "--stream", f"good={video(8)}", "--stream", f"bad={tmp_path / 'missing.mp4'}",
                         "--model", "tiny")  # fmt: skip
    assert code == 2 and "stream 'bad'" in err, err[-1500:]


def test_typed_questions_go_to_the_named_stream_or_to_all():
    names = ["door", "yard"]
    assert route("door: is the gate open?", names) == ("is the gate open?", "door")
    assert route("  yard :  any dogs? ", names) == ("any dogs?", "yard")
    assert route("what time is it: noon?", names) == ("what time is it: noon?", None)
    assert route("door:", names) == ("door:", None)
    assert route("is anyone there?", names) == ("is anyone there?", None)


SHAPE = KvShape(layers=30, kv_heads=3, head_dim=64, element_bytes=4)  # the reference model in fp32


def test_a_stream_costs_its_buffers_tokens_times_the_bytes_of_a_token():
    cost = stream_cost(SHAPE, CacheConfig(budget=2048, recall=256, store_bytes=2**30), chunk_size=512)
    assert SHAPE.bytes_per_token == 30 * 3 * (2 * 64 * 4 + 28)
    assert cost.device_tokens == 3072  # 2048 + 256 + 1 + 512 = 2817, rounded up to the buffers' 256
    assert cost.device_bytes == 3072 * SHAPE.bytes_per_token and cost.host_bytes == 2**30
    full = stream_cost(SHAPE, CacheConfig(policy="full", recall=256, store_bytes=2**30), chunk_size=512)
    assert full.device_tokens is None and full.host_bytes == 0


def test_admission_refuses_what_does_not_fit_with_the_arithmetic():
    cost = StreamCost(device_tokens=3072, bytes_per_token=48600, host_bytes=2**30, host_in_ram=True)
    per_stream = cost.device_bytes + cost.host_bytes
    check_fits(cost, 4, device_free=int(4 * per_stream / 0.79), host_free=0, shared_memory=True)
    with pytest.raises(AdmissionError) as refused:
        check_fits(cost, 4, device_free=int(4 * per_stream / 0.81), host_free=0, shared_memory=True)
    assert "4 stream(s) x" in str(refused.value) and "3072 tokens" in str(refused.value)
    assert "lower --budget" in str(refused.value)
    # on a GPU, device KV and host stores are checked against their own memories
    check_fits(cost, 4, device_free=4 * cost.device_bytes * 2, host_free=4 * 2**30 * 2, shared_memory=False)
    with pytest.raises(AdmissionError, match="host stores"):
        check_fits(cost, 4, device_free=4 * cost.device_bytes * 2, host_free=4 * 2**30, shared_memory=False)


def test_admission_of_one_more_counts_what_the_running_streams_hold_as_spent_not_free():
    # adding a 4th stream: the 3 running ones already hold part of their cost, so that part is not free any more
    cost = StreamCost(device_tokens=3072, bytes_per_token=48600, host_bytes=2**30, host_in_ram=True)
    per_stream = cost.device_bytes + cost.host_bytes
    free = int(3.5 * per_stream / 0.8)  # enough for 3.5 more streams' full cost
    with pytest.raises(AdmissionError):  # 4 full streams against it: refused
        check_fits(cost, 4, device_free=free, host_free=0, shared_memory=True)
    held = (2 * cost.device_bytes, 2**30)  # two streams' buffers full, one store's worth of blocks
    line = check_fits(cost, 4, device_free=free, host_free=0, shared_memory=True, held=held)
    assert "less the" in line and "the running streams hold already" in line
    # the stores are held in RAM only: with stores in a folder, held host bytes are not credited
    on_disk = StreamCost(device_tokens=3072, bytes_per_token=48600, host_bytes=2**30, host_in_ram=False)
    with pytest.raises(AdmissionError):
        check_fits(on_disk, 4, device_free=int(3.5 * on_disk.device_bytes / 0.8), host_free=0, shared_memory=True,
                   held=(0, 2**30))  # fmt: skip


def test_streams_that_do_not_fit_exit_2_before_any_stream_starts(capsys):
    code, err = run_main(
        capsys, "--stream", f"a={video(8)}", "--stream", f"b={video(8)}", "--model", "tiny", "--recall", "64",
        "--store-mb", "1048576",
    )  # fmt: skip
    assert code == 2, err[-1500:]
    assert "do not fit in memory: 2 stream(s) x" in err and "watching" not in err


def test_ingest_warning_names_what_to_lower_only_when_clips_come_faster_than_they_are_ingested():
    assert ingest_warning([0.5, 0.5], live_streams=4, clip_seconds=4.0) is None  # 1 clip/s needed, 2 possible
    warning = ingest_warning([2.0, 2.0], live_streams=4, clip_seconds=4.0)  # 1 needed, 0.5 possible
    assert warning is not None and "--fps" in warning and "1.00 clips/s" in warning


def test_a_config_file_with_1000_streams_exits_2_naming_the_cap_before_the_model_loads(tmp_path, capsys):
    config_file = tmp_path / "many.toml"
    config_file.write_text("".join(f'[streams.s{i}]\nsource = "rtsp://camera.example.com/{i}"\n' for i in range(1000)))
    code, err = run_main(capsys, "--config", str(config_file), "--model", "tiny")
    assert code == 2, err[-1500:]
    assert "1000 streams are configured, more than --max-streams 8" in err
    assert "loading" not in err  # refused before the model loads
    args = parse_args(["--config", str(config_file), "--max-streams", "1000"])
    assert len(AppConfig.from_args(args).streams) == 1000  # the operator may raise the cap; admission then decides


def test_max_streams_and_source_networks_come_from_flags_and_the_config_file(tmp_path):
    config_file = tmp_path / "run.toml"
    config_file.write_text('max_streams = 12\nallow_source_nets = ["192.168.1.0/24"]\n')
    args = parse_args(["--camera", "2", "--config", str(config_file), "--allow-source-net", "10.0.0.0/8"])
    config = AppConfig.from_args(args)
    assert config.max_streams == 12
    assert [str(net) for net in config.allow_source_nets] == ["192.168.1.0/24", "10.0.0.0/8"]
    policy = config.source_policy()
    assert policy.cameras == {2} and policy.check("rtsp://192.168.1.20/s") == "rtsp://192.168.1.20/s"
    assert AppConfig.from_args(parse_args(["--video", "a.mp4"])).max_streams == 8


@pytest.mark.parametrize(
    ("args", "toml", "message"),
    [
        (["--video", "a.mp4", "--max-streams", "0"], "", "--max-streams must be a whole number >= 1"),
        (["--video", "a.mp4", "--allow-source-net", "lan"], "", "--allow-source-net 'lan' is not a network"),
        ([], "max_streams = 0\n", "--max-streams must be a whole number"),
        (
            ["--camera", "gst:v4l2src ! tee name=t ! appsink t. ! queue ! filesink location=/tmp/x"],
            "",
            "stream 'camera': GStreamer pipeline",
        ),
        ([], '[streams.cam]\nsource = "gst:v4l2src ! tcpserversink port=5000"\n', "'tcpserversink' is not allowed"),
    ],
)
def test_bad_source_settings_are_refused_naming_the_setting(tmp_path, args, toml, message):
    config_file = tmp_path / "run.toml"
    config_file.write_text(toml)
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        AppConfig.from_args(parse_args([*(args or ["--video", "a.mp4"]), "--config", str(config_file)]))


def test_allow_source_nets_of_the_wrong_type_in_toml_exit_2_naming_it(tmp_path, capsys):
    config_file = tmp_path / "run.toml"
    config_file.write_text('allow_source_nets = "192.168.1.0/24"\n')
    with pytest.raises(SystemExit) as exited:
        parse_args(["--video", "a.mp4", "--config", str(config_file)])
    assert exited.value.code == 2 and "allow_source_nets must be a list" in capsys.readouterr().err


def test_a_writing_gst_pipeline_at_start_exits_2_before_the_model_loads(capsys):
    code, err = run_main(capsys, "--camera", "gst:v4l2src ! tee name=t ! appsink t. ! queue ! filesink location=/tmp/x",
                         "--model", "tiny")  # fmt: skip
    assert code == 2 and "'tee' is not allowed" in err, err[-1500:]
    assert "loading" not in err


CAPTURE = CaptureShape((448, 448), fps=1.0, clip_seconds=4.0, queue_size=2, decoder_threads=2, scaler_threads=2)
MODEL = ModelShape(hidden=1536, intermediate=8960, heads=12, vocab=151936, element_bytes=2)  # Qwen2-VL-2B's text model


def test_a_stream_costs_its_threads_decoder_frames_and_answer_activations_besides_its_kv():
    extra = stream_overhead(CAPTURE, MODEL, span_tokens=3072)
    assert extra.threads == 5  # the capture thread, two decoder threads, two scaler threads
    assert extra.thread_bytes == 5 * 2 * 2**20
    assert extra.decoder_bytes == (2 + 6) * 1920 * 1080 * 3 // 2  # a frame per thread + 6 held, 1080p YUV 4:2:0
    assert extra.frame_bytes == (2 + 2) * 4 * 448 * 448 * 3  # queue + assembling + ingesting, 4 frames a clip, RGB
    assert extra.answer_bytes == 2 * 151936 * 4 + 12 * 3072 * 4 + (4 * 1536 + 3 * 8960) * 2
    assert extra.host_bytes == extra.thread_bytes + extra.decoder_bytes + extra.frame_bytes
    auto = stream_overhead(CaptureShape((448, 448), 1.0, 4.0), MODEL, span_tokens=3072)
    cores = os.cpu_count() or 1
    assert auto.threads == 1 + (cores + 1 if cores > 1 else 1) + cores  # FFmpeg's automatic thread counts


def test_admission_counts_the_overhead_so_streams_that_fit_by_kv_alone_are_refused():
    kv_only = StreamCost(device_tokens=256, bytes_per_token=4096, host_bytes=0, host_in_ram=True)
    extra = stream_overhead(CAPTURE, MODEL, span_tokens=256)
    cost = replace(kv_only, overhead=extra)
    free = 24 * 2**30  # the machine: 1000 streams of a small budget pass on KV alone
    assert "1000 stream(s)" in check_fits(kv_only, 1000, device_free=free, host_free=free, shared_memory=True)
    with pytest.raises(AdmissionError) as refused:
        check_fits(cost, 1000, device_free=free, host_free=free, shared_memory=True)
    assert "for 5 threads, decoder and frames" in str(refused.value)
    per_stream = kv_only.device_bytes + extra.host_bytes + extra.answer_bytes
    assert check_fits(cost, 10, device_free=int(10 * per_stream / 0.79), host_free=0, shared_memory=True)
    with pytest.raises(AdmissionError):
        check_fits(cost, 10, device_free=int(10 * per_stream / 0.81), host_free=0, shared_memory=True)
    # the running streams' threads, decoders and frames are spent already: one more needs one stream's worth
    one_more = 10 * (kv_only.device_bytes + extra.answer_bytes) + extra.host_bytes
    line = check_fits(cost, 10, device_free=int(one_more / 0.79), host_free=0, shared_memory=True, running=9)
    assert "less the" in line
    with pytest.raises(AdmissionError):
        check_fits(cost, 10, device_free=int(one_more / 0.81), host_free=0, shared_memory=True, running=9)
    # on a GPU, the activations count against the device, the rest against the host
    with pytest.raises(AdmissionError, match="device KV"):
        check_fits(cost, 4, device_free=int(4 * kv_only.device_bytes / 0.8), host_free=free, shared_memory=False)
    with pytest.raises(AdmissionError, match="host stores"):
        check_fits(cost, 4, device_free=free, host_free=int(3.5 * extra.host_bytes / 0.8), shared_memory=False)
