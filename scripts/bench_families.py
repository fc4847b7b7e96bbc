"""Per supported family, on its 2B-class checkpoint's real shapes with random weights: what a clip and an answer
token cost (issue 33, "Measure").

    python scripts/bench_families.py                                  # the four 2B-class checkpoints
    python scripts/bench_families.py --families qwen2-vl qwen3-vl --clips 4 --decode-tokens 32
    python scripts/bench_families.py --quick --families qwen3-vl      # smoke test: the fixtures' shrunk sizes

The model of each family is built from its hub fixture (tests/fixtures/hub: the published config, processor,
chat template and special tokens) with the published sizes put back (PUBLISHED below; layers, vocabulary, patch
and merge sizes, rope settings are the fixture's own, published values), random weights, float32 (this CPU's fast
dtype). `--quick` keeps the fixture's shrunk sizes instead (seconds per family). One family is built at a time
and freed before the next.

Per family, through the app's own path (model/session.py; the CPU decode kernels and the tuned one-row products
of app/startup.py): `--clips` default clips (`--fps 1 --clip-seconds 4`: 4 frames of a 640x480 source, downscaled
as the capture does to the adapter's frame_size; noise frames, dropping unchanged tokens off so every clip enters
whole, i.e. each clip costs what a key frame costs) are ingested: vision tower + chunked prefill into the bounded
cache (CacheConfig defaults, the CLI's --recall, --chunk-size 512). Then a question is prefilled (TTFT) and
`--decode-tokens` tokens are decoded with the session's decode step (eager, as the app without --compile); the
token picked is fed back whatever it is (random weights say end-of-turn at random).

The decode bound: a decode step reads every decoder weight once (the vision tower and the connector not at all;
an untied input embedding by one row only) and every cached key and value once, so bytes read per token / the
machine's memory bandwidth bounds it from below. The bandwidth is measured right before each family's decode
steps: a torch copy of 512 MiB into another 512 MiB (bytes read + written per second, the bound's rate) and a
torch sum over 512 MiB (bytes read per second); --quick: 128 MiB. Medians: clips after the first (a warm-up),
decode steps after the first.

KV bytes per token, three ways: the cache's own buffers (bytes held / token slots, this run's float32), the
config arithmetic (layers x KV heads x head dim x 2 x dtype bytes, float32 and the published bf16) and the
admission's (app/admission.py KvShape: the same plus per-token bookkeeping: positions, origin, index,
attention). The memory of one stream on a Jetson (bf16) is the admission's device KV per stream at the defaults.

Writes --out/bench_families.csv (one row per family), bench_families_steps.csv (every clip and decode step) and
bench_families.png, and prints a markdown table with the machine, its load before and after, and the date.
"""

from __future__ import annotations

import argparse
import csv
import gc
import json
import os
import statistics
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import torch
from tqdm import tqdm
from transformers import AutoConfig, GenerationConfig

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.admission import KvShape, stream_cost  # noqa: E402
from app.cli import DEFAULT_RECALL  # noqa: E402
from cache.attention import register_attention  # noqa: E402
from cache.config import CacheConfig  # noqa: E402
from cache.cpu.kernels import kernels_ready  # noqa: E402
from cache.cpu.layouts import tune_linear_layouts  # noqa: E402
from model.change import ChangeConfig  # noqa: E402
from model.families import FAMILIES  # noqa: E402
from model.loading import LoadedModel, attention_implementation  # noqa: E402
from model.processor import VisionTextProcessor  # noqa: E402
from model.session import SessionConfig, StreamingSession  # noqa: E402
from scripts.bench_ingest import machine  # noqa: E402
from scripts.model_shapes import FRAMES, SOURCE, fit  # noqa: E402
from tests.support.hub_fixture import materialize  # noqa: E402

CHECKPOINTS = {
    "qwen2-vl": "Qwen/Qwen2-VL-2B-Instruct",
    "qwen2.5-vl": "Qwen/Qwen2.5-VL-3B-Instruct",
    "qwen3-vl": "Qwen/Qwen3-VL-2B-Instruct",
    "smolvlm2": "HuggingFaceTB/SmolVLM2-2.2B-Instruct",
    "qwen3.5": "Qwen/Qwen3.5-2B",
    "qwen3.5-0.8b": "Qwen/Qwen3.5-0.8B",
}
DEFAULT_FAMILIES = ["qwen2-vl", "qwen2.5-vl", "qwen3-vl", "smolvlm2", "qwen3.5"]
# Both Qwen3.5 checkpoints' head counts (8 / 2 attention heads of 256, 16 Gated DeltaNet heads for QK and V)
QWEN35_HEADS = dict(
    num_attention_heads=8, num_key_value_heads=2, head_dim=256, linear_num_key_heads=16, linear_num_value_heads=16
)
# The published sizes the hub fixtures shrink (tests/fixtures/hub/FIXTURE-SOURCES.md); every other key is the
# fixture's. head_dim is given because a config computes it from the shrunk sizes when it is not published.
PUBLISHED = {
    "Qwen/Qwen2-VL-2B-Instruct": dict(
        text=dict(
            hidden_size=1536, intermediate_size=8960, num_attention_heads=12, num_key_value_heads=2, head_dim=128
        ),
        vision=dict(embed_dim=1280, num_heads=16, hidden_size=1536),
    ),
    "Qwen/Qwen2.5-VL-3B-Instruct": dict(
        text=dict(
            hidden_size=2048, intermediate_size=11008, num_attention_heads=16, num_key_value_heads=2, head_dim=128
        ),
        vision=dict(hidden_size=1280, intermediate_size=3420, num_heads=16, out_hidden_size=2048),
    ),
    "Qwen/Qwen3-VL-2B-Instruct": dict(
        text=dict(
            hidden_size=2048, intermediate_size=6144, num_attention_heads=16, num_key_value_heads=8, head_dim=128
        ),
        vision=dict(hidden_size=1024, intermediate_size=4096, num_heads=16, out_hidden_size=2048),
    ),
    "HuggingFaceTB/SmolVLM2-2.2B-Instruct": dict(
        text=dict(
            hidden_size=2048, intermediate_size=8192, num_attention_heads=32, num_key_value_heads=32, head_dim=64
        ),
        vision=dict(hidden_size=1152, intermediate_size=4304, num_attention_heads=16),
    ),
    "Qwen/Qwen3.5-2B": dict(  # the hybrid: its Gated DeltaNet layers' head counts are put back too
        text=dict(hidden_size=2048, intermediate_size=6144, **QWEN35_HEADS),
        vision=dict(hidden_size=1024, intermediate_size=4096, num_heads=16, out_hidden_size=2048),
    ),
    # The 0.8B: the fixture's config.json is the published one shrunk; these are its published values (the same
    # file's values as public parsers of it assert them: hidden 1024, intermediate 3584, 8 / 2 heads of 256,
    # 16 linear heads; vision 12 blocks of 768, 12 heads, 3072 intermediate, out 1024).
    "Qwen/Qwen3.5-0.8B": dict(
        text=dict(hidden_size=1024, intermediate_size=3584, **QWEN35_HEADS),
        vision=dict(hidden_size=768, intermediate_size=3072, num_heads=12, out_hidden_size=1024),
    ),
}
QUESTION = "What is happening in the video?"
CPU = torch.device("cpu")
PROBE_FLOATS = 2**27  # 512 MiB of float32 per probe buffer: far beyond any cache
QUICK_PROBE_FLOATS = 2**25  # --quick: 128 MiB, still beyond a CPU's last-level cache, a quarter of the time


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--families", nargs="+", choices=list(CHECKPOINTS), default=DEFAULT_FAMILIES,
                   help="families (qwen3.5-0.8b: the 0.8B hybrid, on request)")  # fmt: skip
    p.add_argument("--device", default="cpu", help="cpu or cuda (cuda: no CPU kernels, times after a synchronize)")
    p.add_argument("--dtype", choices=["auto", "float32", "bfloat16", "float16"], default="auto",
                   help="auto: float32 on a CPU (its fast dtype), bfloat16 on a GPU (the app's auto)")  # fmt: skip
    p.add_argument("--clips", type=int, default=3, help="default clips ingested per family (the first is a warm-up)")
    p.add_argument("--decode-tokens", type=int, default=16, help="answer tokens decoded per family")
    p.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default, every core)")
    p.add_argument("--quick", action="store_true", help="smoke test: the hub fixtures' shrunk sizes, 2 clips, 4 tokens")
    p.add_argument("--fixture-sizes", action="store_true", help="the hub fixtures' shrunk sizes with --clips as given "
                   "(an hour of stream, 900 clips, in minutes: what the memory over time shows)")  # fmt: skip
    p.add_argument("--out", type=Path, default=Path("docs/models"), help="CSV, PNG")
    p.add_argument("--report-only", action="store_true", help="measure nothing: the table and plot of --out's CSV")
    args = p.parse_args(argv)
    if args.quick:
        args.clips, args.decode_tokens = min(args.clips, 2), min(args.decode_tokens, 4)
    args.shrunk = args.quick or args.fixture_sizes
    if args.clips < 2 or args.decode_tokens < 2 or args.threads < 0:
        p.error("--clips and --decode-tokens must be >= 2 (the first of each is a warm-up), --threads >= 0")
    args.device = torch.device(args.device)
    if args.device.type not in ("cpu", "cuda"):
        p.error(f"--device {args.device}: cpu or cuda")
    if args.device.type == "cuda" and not torch.cuda.is_available():
        p.error("--device cuda: torch sees no CUDA device here (torch.cuda.is_available() is False)")
    if args.dtype == "auto":
        args.dtype = "float32" if args.device.type == "cpu" else "bfloat16"
    args.dtype = getattr(torch, args.dtype)
    return args


# -- the model ------------------------------------------------------------------------------------------------


def full_config(hub_id: str, folder: Path):
    """The checkpoint's config (the fixture's, published keys and values) with the published sizes put back."""
    config = AutoConfig.from_pretrained(folder, local_files_only=True)
    sizes = PUBLISHED[hub_id]
    for key, value in sizes["text"].items():
        setattr(config.get_text_config(), key, value)
    for key, value in sizes["vision"].items():
        setattr(config.vision_config, key, value)
    return config


def build(
    hub_id: str, folder: Path, quick: bool, device: torch.device = CPU, dtype: torch.dtype = torch.float32
) -> LoadedModel:
    """The checkpoint as the app would hold it: random weights of the published shapes (or the fixture's shrunk
    ones with `quick`), on `device` in `dtype`, the text attention the cache registers, the family's adapter."""
    path = materialize(hub_id, folder)  # the fixture's files; its shrunk weights are not used
    config = AutoConfig.from_pretrained(path, local_files_only=True) if quick else full_config(hub_id, path)
    family = FAMILIES[config.model_type]
    processor = VisionTextProcessor.from_pretrained(str(path), family.image_processor_class, local_files_only=True)
    with torch.device(device), torch.random.fork_rng(devices=[]):  # drawn where it runs: a GPU draws fast
        torch.manual_seed(0)
        model = family.model_class(config)
    model.set_attn_implementation(attention_implementation(register_attention()))
    model.to(device=device, dtype=dtype).eval()
    model.generation_config = GenerationConfig(**json.loads((path / "generation_config.json").read_text()))
    adapter = family.adapter_class(model.config, processor, model.generation_config)
    return LoadedModel(model, processor, adapter, device, dtype, hub_id, family.model_type)


def decoder_weight_bytes(model: torch.nn.Module) -> int:
    """Bytes of weights one decode step reads: the text decoder's and the output layer's, each once (a tied
    embedding is the output layer; an untied input embedding is read by one row, not counted)."""
    weights = {id(p): p for p in model.get_decoder().parameters()}
    weights[id(model.get_output_embeddings().weight)] = model.get_output_embeddings().weight
    embedding = model.get_input_embeddings().weight
    if embedding is not model.get_output_embeddings().weight:
        weights.pop(id(embedding), None)
    return sum(p.numel() * p.element_size() for p in weights.values())


def kv_shape(model: torch.nn.Module) -> tuple[int, int, int]:
    """(layers holding keys and values, KV heads, head dim) of the text decoder, from its config (a hybrid's
    linear-attention layers hold none)."""
    text = model.config.get_text_config()
    head_dim = getattr(text, "head_dim", None) or text.hidden_size // text.num_attention_heads
    kinds = getattr(text, "layer_types", None)
    layers = sum(kind == "full_attention" for kind in kinds) if kinds else text.num_hidden_layers
    return layers, text.num_key_value_heads, head_dim


def cache_bytes_per_token(session: StreamingSession) -> int:
    """Bytes of keys and values the session's cache holds per token slot, over all layers (its buffers)."""
    slots = {layer.keys.shape[-2] for layer in session.cache.kv_layers if layer.is_initialized}
    if len(slots) != 1:
        raise RuntimeError(f"layers hold different numbers of token slots: {sorted(slots)}")
    return session.cache.kv_bytes() // slots.pop()


# -- bandwidth -----------------------------------------------------------------------------------------------


def bandwidth(device: torch.device = CPU, floats: int = PROBE_FLOATS) -> tuple[float, float]:
    """(copy, read) bytes per second of `device`'s memory: a torch copy of `floats` float32 (512 MiB; a --quick
    run's 128 MiB) into as many (bytes read + written) and a torch sum over them (bytes read), median of 7 each
    after a warm-up."""
    src = torch.ones(floats, device=device)
    dst = torch.empty_like(src)
    nbytes = src.numel() * src.element_size()
    copy = _median_seconds(lambda: dst.copy_(src), device)
    read = _median_seconds(src.sum, device)
    return 2 * nbytes / copy, nbytes / read


def _median_seconds(fn, device: torch.device = CPU, repeats: int = 7) -> float:
    fn()
    times = []
    for _ in range(repeats):
        sync(device)
        started = time.perf_counter()
        fn()
        sync(device)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def sync(device: torch.device) -> None:
    """Waits for a GPU's queued kernels (a clock read then times the work, not its launch); nothing on a CPU."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def device_bytes(session: StreamingSession) -> int:
    """What the stream holds on its device: torch's allocated GPU memory (weights, cache, workspace) on a GPU;
    the cache's keys and values on a CPU (the process's RSS there mixes in everything else)."""
    device = session.loaded.device
    return torch.cuda.memory_allocated(device) if device.type == "cuda" else session.cache.kv_bytes()


def process_rss() -> int:
    """The process's resident memory now (bytes; 0 where /proc is missing): everything it holds, the host store and
    the allocator's slack included, which a leak anywhere would grow."""
    try:
        pages = int(Path("/proc/self/statm").read_text().split()[1])
    except (OSError, IndexError, ValueError):
        return 0
    return pages * os.sysconf("SC_PAGE_SIZE")


# -- the measurement -----------------------------------------------------------------------------------------


def default_clip(adapter, index: int, rng: np.random.Generator) -> tuple[np.ndarray, float, float]:
    """A default clip: FRAMES noise frames of a 640x480 source downscaled to the adapter's frame box, at stream
    seconds [4 index, 4 index + 4)."""
    h, w = fit(*SOURCE, adapter.frame_size())
    frames = rng.integers(0, 256, size=(FRAMES, h, w, 3), dtype=np.uint8)
    return frames, 4.0 * index, 4.0 * index + 4.0


def measure(name: str, loaded: LoadedModel, args, bar: tqdm) -> tuple[dict, list[dict]]:
    """One family: the clips, the question and the decode steps. Returns (the family's row, its step rows)."""
    model, adapter = loaded.model, loaded.adapter
    cache_config = CacheConfig(recall=DEFAULT_RECALL, store_bytes=256 * 2**20)  # the CLI's defaults, a fixed store
    session = StreamingSession(loaded, cache_config, SessionConfig(change=ChangeConfig(drop_unchanged=False)))
    rng = np.random.default_rng(0)
    steps, load_before = [], os.getloadavg()[0]
    for i in range(args.clips):
        frames, t0, t1 = default_clip(adapter, i, rng)
        sync(loaded.device)
        started, cpu = time.perf_counter(), time.process_time()
        m = session.ingest_clip(frames, t0, t1)
        sync(loaded.device)
        total_ms = (time.perf_counter() - started) * 1000
        cpu_ms = (time.process_time() - cpu) * 1000
        steps.append(dict(family=name, kind="clip", index=i, frames=m.frames, visual_tokens=m.visual_tokens,
                          tokens=m.prefill_tokens, vision_ms=round(m.vision_s * 1000, 2),
                          prefill_ms=round((m.prefill_s - m.vision_s) * 1000, 2), ms=round(total_ms, 2),
                          cpu_ms=round(cpu_ms, 2), cache_tokens=m.cache_tokens,
                          device_bytes=device_bytes(session), rss_bytes=process_rss()))  # fmt: skip
        bar.update(1)
    started = time.perf_counter()
    turn = session.open_turn(QUESTION, session.question_segment(QUESTION))
    ttft_ms = (time.perf_counter() - started) * 1000
    cache_tokens = session.cache.get_seq_length()
    copy_rate, read_rate = bandwidth(loaded.device, QUICK_PROBE_FLOATS if args.quick else PROBE_FLOATS)
    logits = turn.logits
    for i in range(args.decode_tokens):
        token = int(logits.argmax(-1))
        started, cpu = time.perf_counter(), time.process_time()
        logits = session.runner.decode_step(token)
        sync(loaded.device)
        ms, cpu_ms = (time.perf_counter() - started) * 1000, (time.process_time() - cpu) * 1000
        steps.append(dict(family=name, kind="decode", index=i, ms=round(ms, 2), cpu_ms=round(cpu_ms, 2),
                          cache_tokens=cache_tokens + i + 1))  # fmt: skip
        bar.update(1)

    layers, kv_heads, head_dim = kv_shape(model)
    kv_fp32 = layers * kv_heads * head_dim * 2 * 4
    kv_bf16 = layers * kv_heads * head_dim * 2 * 2
    admission_fp32 = KvShape.of_model(model, adapter.position_dims).bytes_per_token
    orin = stream_cost(KvShape(layers, kv_heads, head_dim, 2, adapter.position_dims), cache_config, 512)
    weights = decoder_weight_bytes(model)
    decode_cache = statistics.median(s["cache_tokens"] for s in steps if s["kind"] == "decode")
    kv_run = layers * kv_heads * head_dim * 2 * torch.finfo(loaded.dtype).bits // 8  # this run's dtype
    read_per_token = round(weights + decode_cache * kv_run)
    clips = [s for s in steps if s["kind"] == "clip"][1:]
    decodes = [s["ms"] for s in steps if s["kind"] == "decode"][1:]
    decode_cpu = [s["cpu_ms"] for s in steps if s["kind"] == "decode"][1:]
    decode_ms = statistics.median(decodes)
    bound_ms = read_per_token / copy_rate * 1000
    h, w = fit(*SOURCE, adapter.frame_size())
    row = dict(
        family=name,
        checkpoint=loaded.name,
        parameters=loaded.num_parameters,
        decoder_weight_bytes=weights,
        frame_box=f"{adapter.frame_size()[0]}x{adapter.frame_size()[1]}",
        clip_frames=f"{FRAMES}x{w}x{h}",
        visual_tokens_per_clip=steps[0]["visual_tokens"],
        visual_tokens_per_frame=round(steps[0]["visual_tokens"] / FRAMES, 1),
        tokens_per_clip=steps[0]["tokens"],
        clips=len(clips) + 1,
        vision_ms_per_clip=round(statistics.median(s["vision_ms"] for s in clips), 1),
        prefill_ms_per_clip=round(statistics.median(s["prefill_ms"] for s in clips), 1),
        ingest_ms_per_clip=round(statistics.median(s["ms"] for s in clips), 1),
        ingest_cpu_ms_per_clip=round(statistics.median(s["cpu_ms"] for s in clips), 1),
        ingest_ms_per_frame=round(statistics.median(s["ms"] for s in clips) / FRAMES, 2),
        device_bytes_first_clip=steps[0]["device_bytes"],
        device_bytes_last_clip=clips[-1]["device_bytes"],
        device_bytes_max=max(s["device_bytes"] for s in steps if s["kind"] == "clip"),
        ttft_ms=round(ttft_ms, 1),
        decode_tokens=len(decodes) + 1,
        decode_cache_tokens=decode_cache,
        decode_ms_per_token=round(decode_ms, 1),
        decode_cpu_ms_per_token=round(statistics.median(decode_cpu), 1),
        read_bytes_per_token=read_per_token,
        copy_gb_per_s=round(copy_rate / 1e9, 2),
        read_gb_per_s=round(read_rate / 1e9, 2),
        bound_ms_per_token=round(bound_ms, 1),
        x_bound=round(decode_ms / bound_ms, 2),
        x_read_bound=round(decode_ms / (read_per_token / read_rate * 1000), 2),
        layers=layers,
        kv_heads=kv_heads,
        head_dim=head_dim,
        kv_bytes_per_token_cache=cache_bytes_per_token(session),
        kv_bytes_per_token_fp32=kv_fp32,
        kv_bytes_per_token_bf16=kv_bf16,
        admission_bytes_per_token_fp32=admission_fp32,
        weights_bf16_bytes=loaded.num_parameters * 2,
        stream_kv_bf16_bytes=orin.device_bytes,
        stream_kv_tokens=orin.device_tokens,
        load_before=round(load_before, 2),
        load_after=round(os.getloadavg()[0], 2),
    )
    return row, steps


# -- output ---------------------------------------------------------------------------------------------------


def load_line() -> str:
    """`load average 1.23 0.98 0.80` (1, 5, 15 minutes), as `uptime` prints it."""
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f} {five:.2f} {fifteen:.2f}"


def markdown(rows: list[dict], header: str) -> str:
    lines = [
        header,
        "",
        "| checkpoint | parameters | visual tokens / frame | visual tokens / clip (tokens) | vision ms / clip "
        "| ingest ms / clip (CPU ms) | ingest ms / frame | TTFT ms | decode ms / token (CPU ms) "
        "| bound ms / token (x) | KV bytes / token fp32 (bf16) | admission bytes / token fp32 "
        "| Orin: bf16 weights + KV / stream |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| `{r['checkpoint']}` | {r['parameters'] / 1e9:.2f} B | {r['visual_tokens_per_frame']:g} "
            f"| {r['visual_tokens_per_clip']} ({r['tokens_per_clip']}) | {r['vision_ms_per_clip']:,.0f} "
            f"| {r['ingest_ms_per_clip']:,.0f} ({r['ingest_cpu_ms_per_clip']:,.0f}) "
            f"| {r.get('ingest_ms_per_frame', r['ingest_ms_per_clip'] / FRAMES):,.1f} | {r['ttft_ms']:,.0f} "
            f"| {r['decode_ms_per_token']:,.0f} ({r['decode_cpu_ms_per_token']:,.0f}) "
            f"| {r['bound_ms_per_token']:,.0f} ({r['x_bound']:.2f}x) "
            f"| {r['kv_bytes_per_token_fp32']:,} ({r['kv_bytes_per_token_bf16'] / 1024:g} KiB) "
            f"| {r['admission_bytes_per_token_fp32']:,} "
            f"| {r['weights_bf16_bytes'] / 2**30:.2f} GiB + {r['stream_kv_bf16_bytes'] / 2**20:.0f} MiB |"
        )
    return "\n".join(lines)


def plot(rows: list[dict], path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = [r["family"] for r in rows]
    x = np.arange(len(rows))
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.8))
    vision = [r["vision_ms_per_clip"] for r in rows]
    prefill = [r["ingest_ms_per_clip"] - r["vision_ms_per_clip"] for r in rows]
    axes[0].bar(x, vision, 0.6, label="vision tower", color="#a78bfa")
    axes[0].bar(x, prefill, 0.6, bottom=vision, label="prefill into the cache", color="#7c3aed")
    axes[0].plot(x, [r["ingest_cpu_ms_per_clip"] for r in rows], "k_", markersize=30, label="CPU ms (process)")
    axes[0].set_title("ingest ms / default clip (4 frames)", fontsize=10)
    axes[0].legend(fontsize=8)
    axes[1].bar(x - 0.27, [r["decode_ms_per_token"] for r in rows], 0.27, label="wall", color="#7c3aed")
    axes[1].bar(x, [r["decode_cpu_ms_per_token"] for r in rows], 0.27, label="CPU (process)", color="#a78bfa")
    axes[1].bar(x + 0.27, [r["bound_ms_per_token"] for r in rows], 0.27, label="bandwidth bound", color="#9ca3af")
    axes[1].set_title("decode ms / token", fontsize=10)
    axes[1].legend(fontsize=8)
    axes[2].bar(x, [r["kv_bytes_per_token_bf16"] / 1024 for r in rows], 0.6, color="#7c3aed")
    axes[2].set_title("KV KiB / token (bf16)", fontsize=10)
    for ax in axes:
        ax.set_xticks(x, labels, fontsize=8)
        ax.grid(alpha=0.3, axis="y")
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_memory(steps: list[dict], path: Path, title: str) -> None:
    """What each stream holds on its device after every clip (device_bytes), one line per family; beside it the
    process's resident memory (rss_bytes) where the steps have it."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    clip_steps = [s for s in steps if s["kind"] == "clip"]
    panels = [("device_bytes", "MiB the stream holds (CPU: its KV cache)")]
    if clip_steps and all(int(s.get("rss_bytes") or 0) > 0 for s in clip_steps):
        panels.append(("rss_bytes", "the process's resident MiB"))
    fig, axes = plt.subplots(1, len(panels), figsize=(9 * len(panels), 4.5), squeeze=False)
    for ax, (key, label) in zip(axes[0], panels, strict=True):
        top = 0.0
        for family in dict.fromkeys(s["family"] for s in clip_steps):
            clips = [s for s in clip_steps if s["family"] == family]
            minutes = [(s["index"] + 1) * 4 / 60 for s in clips]
            held = [int(s[key]) / 2**20 for s in clips]
            top = max(top, *held)
            spread = max(held[len(held) // 10 :]) - min(held[len(held) // 10 :])
            ax.plot(minutes, held, label=f"{family}: {held[-1]:,.1f} MiB at the end, spread {spread * 1024:,.0f} KiB "
                    f"after the first tenth")  # fmt: skip
        ax.set_ylim(0, top * 1.2)  # from zero: what is flat looks flat
        ax.ticklabel_format(axis="y", useOffset=False, style="plain")
        ax.set_xlabel("minutes of stream (4-s clips)")
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
        ax.set_title(title, fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_csv(path: Path, rows: list[dict]) -> None:
    fields = list(dict.fromkeys(k for row in rows for k in row))
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=fields)
        writer.writeheader()
        writer.writerows(rows)


def read_rows(path: Path) -> list[dict]:
    """The family rows of an earlier run, numbers parsed back."""

    def value(text: str):
        for kind in (int, float):
            try:
                return kind(text)
            except ValueError:
                pass
        return text

    with path.open(newline="") as f:
        return [{k: value(v) for k, v in row.items()} for row in csv.DictReader(f)]


def main(argv: list[str] | None = None) -> str:
    args = parse_args(argv)
    if args.report_only:
        rows = read_rows(args.out / "bench_families.csv")
        header = "Reported from the CSV (the machine's load per family: its load_before and load_after columns)."
        cpu = machine().split(", torch")[0]
        plot(rows, args.out / "bench_families.png", f"{cpu}; reported from {args.out / 'bench_families.csv'}")
        if (args.out / "bench_families_steps.csv").exists():
            steps = read_rows(args.out / "bench_families_steps.csv")
            plot_memory(steps, args.out / "bench_families_memory.png", f"reported from {args.out}")
        table = markdown(rows, header)
        print(table)
        return table
    if args.threads:
        torch.set_num_threads(args.threads)
    args.out.mkdir(parents=True, exist_ok=True)
    before, date = load_line(), datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    dtype = str(args.dtype).removeprefix("torch.")
    machine_line = machine().split(", load average")[0].replace(", float32", f", {dtype}")
    on_cpu = args.device.type == "cpu"
    if not on_cpu:
        machine_line += f", GPU {torch.cuda.get_device_name(args.device)}"
    kernels = on_cpu and kernels_ready()  # the app builds them at start-up on a CPU in float32
    rows, steps = [], []
    with tqdm(total=len(args.families) * (args.clips + args.decode_tokens), desc="bench_families", unit="step") as bar:
        for name in args.families:
            bar.set_postfix(family=name, stage="building")
            with tempfile.TemporaryDirectory() as tmp:
                loaded = build(CHECKPOINTS[name], Path(tmp), args.shrunk, args.device, args.dtype)
            if on_cpu:
                tune_linear_layouts(loaded.model)  # what app/startup.py does on a CPU
            bar.set_postfix(family=name, stage="measuring")
            row, family_steps = measure(name, loaded, args, bar)
            rows.append(row)
            steps += family_steps
            write_csv(args.out / "bench_families.csv", rows)  # what is done survives an interrupted run
            write_csv(args.out / "bench_families_steps.csv", steps)
            del loaded
            gc.collect()
            if not on_cpu:
                torch.cuda.empty_cache()
    sizes = "the hub fixtures' shrunk sizes" if args.shrunk else "published sizes, random weights"
    header = (
        f"Machine: {machine_line}, CPU decode kernels {'on' if kernels else 'off'}; {before} before, {load_line()} "
        f"after; {date}. {sizes}; default clips (4 frames at 1 frame/s from 640x480, every clip whole: dropping "
        f"off), medians of {args.clips - 1} clips and {args.decode_tokens - 1} decode steps after a warm-up; "
        f"bandwidth (torch copy, read + written) {statistics.median(r['copy_gb_per_s'] for r in rows):.1f} GB/s, "
        f"read (torch sum) {statistics.median(r['read_gb_per_s'] for r in rows):.1f} GB/s (medians over families)."
    )
    plot(rows, args.out / "bench_families.png", f"{machine_line}; {sizes}; {date}")
    plot_memory(steps, args.out / "bench_families_memory.png", f"{machine_line}; {sizes}; {date}")
    table = markdown(rows, header)
    print(table)
    print(f"wrote {args.out}/bench_families.csv, bench_families_steps.csv, bench_families.png, "
          "bench_families_memory.png")  # fmt: skip
    return table


if __name__ == "__main__":
    main()
