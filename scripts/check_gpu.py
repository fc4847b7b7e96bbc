"""Checks every CUDA path of the project on this machine's GPU and prints a verdict (issue 21).

    python scripts/check_gpu.py                    # on the GPU (bf16 where it is native), a few minutes
    python scripts/check_gpu.py --device cpu       # the same checks on the CPU in fp32: a dry run
    python scripts/check_gpu.py --skip-timings     # only the pass/fail checks
    python scripts/check_gpu.py --eager            # decode steps not compiled (what a build without compile runs)

Each check prints one line (name, PASS / FAIL / SKIP, the numbers behind it); then a verdict line. Exit code:
0 when no check failed, 1 when one did, 2 when the device asked for is not there. Every check runs the
project's own code (model/config.py, the memory monitor, BoundedCache, CachedRunner, BatchDecoder):
1. device and dtype: `resolve_dtype("auto")` (bf16 on a GPU with native bf16), a matmul in that dtype.
2. NVML readings: the memory monitor picks NVML and its numbers move with a 256 MiB allocation (CUDA only).
3. bounded cache = transformers: tiny random Llama (GQA), Qwen2-VL (M-RoPE) and Qwen3-VL (interleaved M-RoPE)
   decoders in the device's dtype: greedy tokens of policy `full` equal `model.generate`; under an evicting
   policy the compiled decode step (CUDA graphs on CUDA) gives the eager step's tokens, stays compiled, and no
   CUDA graph was skipped.
4. N streams: `BatchDecoder` over 4 streams (compiled) gives each stream's tokens decoded alone.
5. flat memory: many clips past the budget; device memory per clip after the budget filled stays flat.
6. timings (never fails): one-stream and batched (N=8) decode steps, eager and compiled, against the
   bandwidth bound; then the benchmark commands to run next on this machine for the README rows.

Tokens are compared as greedy decodings: logits must agree within the tolerance
`max(1e-4, 8 eps(dtype)) x max(1, |largest logit|)` at every token, and the tokens must be equal, or equal up
to a near-tie: the first differing token lost to the other by less than that tolerance (bf16 can flip such a
choice; nothing after it is comparable, so the comparison stops there).
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import statistics
import sys
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cache.batch_decode import BatchDecoder  # noqa: E402
from cache.bounded_cache import BoundedCache  # noqa: E402
from cache.config import CacheConfig  # noqa: E402
from cache.runner import CachedRunner  # noqa: E402
from model.config import resolve_device, resolve_dtype  # noqa: E402
from model.resources import process_rss_bytes  # noqa: E402
from scripts.bench_decode import kv_bytes_per_token, weight_bytes  # noqa: E402
from tests.support.tiny_text_models import VOCAB, build_pair  # noqa: E402

SCRIPTS = Path(__file__).resolve().parent
ARCHS = ("llama-gqa", "qwen2-vl", "qwen3-vl", "qwen3.5")  # qwen3.5: the hybrid (3 Gated DeltaNet + 1 attention)
BATCHED_ARCHS = ("qwen2-vl", "qwen3.5")  # the N-streams check's models: attention only, and the hybrid's states
EOS, PAD = 2, 0  # the tiny models' stop and pad tokens
MiB = 2**20


@dataclass
class Result:
    status: str  # "PASS", "FAIL" or "SKIP"
    detail: str


@dataclass
class Context:
    device: torch.device
    dtype: torch.dtype
    compile: bool = True
    steps: int = 16  # timed decode steps per measurement (median)
    budget: int = 2048  # the timing part's cache budget (tokens)
    tiny: dict[str, tuple[torch.nn.Module, torch.nn.Module, int]] = field(default_factory=dict)  # by arch

    @property
    def cuda(self) -> bool:
        return self.device.type == "cuda"

    def tolerance(self, logits: torch.Tensor) -> float:
        """How far two computations of the same logits may be apart in this dtype."""
        return max(1e-4, 8 * torch.finfo(self.dtype).eps) * max(1.0, float(logits.abs().max()))

    def sync(self) -> None:
        if self.cuda:
            torch.cuda.synchronize(self.device)


Check = Callable[[Context], Result]


# -- the runner --------------------------------------------------------------------------------------------


def run_checks(checks: list[tuple[str, Check]], ctx: Context, emit: Callable[[str], None] = print) -> int:
    """Runs every check, prints its line and the verdict; 0 when none failed, else 1. A check that raises fails
    (its traceback goes to stderr)."""
    counts = {"PASS": 0, "FAIL": 0, "SKIP": 0}
    failed = []
    for name, check in checks:
        started = time.perf_counter()
        try:
            result = check(ctx)
        except Exception as e:  # a check that crashes is a failed check, reported with its cause
            traceback.print_exc(file=sys.stderr)
            result = Result("FAIL", f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")
        counts[result.status] += 1
        if result.status == "FAIL":
            failed.append(name)
        emit(f"{name:<30} {result.status:<4}  {result.detail}  [{time.perf_counter() - started:.1f} s]")
    verdict = "FAIL" if failed else "PASS"
    summary = ", ".join(f"{n} {s}" for s, n in counts.items() if n)
    line = f"verdict: {verdict} on {ctx.device.type} ({ctx.dtype}): {summary}"
    emit(line + (f"; failed: {', '.join(failed)}" if failed else ""))
    return 1 if failed else 0


# -- 1. device and dtype -----------------------------------------------------------------------------------


def check_device(ctx: Context) -> Result:
    versions = f"torch {torch.__version__}"
    expected = torch.float32
    if ctx.cuda:
        props = torch.cuda.get_device_properties(ctx.device)
        native = torch.cuda.is_bf16_supported(including_emulation=False)
        expected = torch.bfloat16 if native else torch.float16
        versions += (
            f", CUDA {torch.version.cuda}, {props.name} (sm_{props.major}{props.minor}, "
            f"{props.total_memory / 2**30:.1f} GiB), native bf16 {native}"
        )
    else:
        versions += f", CUDA {'available' if torch.cuda.is_available() else 'not available'}"
    auto = resolve_dtype("auto", ctx.device)
    a = torch.randn(256, 256, device=ctx.device)
    b = torch.randn(256, 256, device=ctx.device)
    exact = a.double() @ b.double()
    err = float(((a.to(ctx.dtype) @ b.to(ctx.dtype)).double() - exact).abs().max() / exact.abs().max())
    ok = auto == expected and err < 16 * torch.finfo(ctx.dtype).eps
    return Result(
        "PASS" if ok else "FAIL",
        f"dtype auto -> {auto} (expected {expected}), running {ctx.dtype}; 256x256 matmul rel. error {err:.1e}; "
        f"{versions}",
    )


# -- 2. NVML ---------------------------------------------------------------------------------------------


def check_nvml(ctx: Context) -> Result:
    if not ctx.cuda:
        return Result("SKIP", "skipped (CPU)")
    from monitor.memory_monitor import MemoryMonitor, is_jetson

    if is_jetson():
        return Result("SKIP", "Jetson: no NVML there (the monitor reads tegrastats / /proc/meminfo)")
    try:
        import pynvml  # noqa: F401
    except ImportError:
        return Result("SKIP", "nvidia-ml-py (pynvml) is not installed: pip install nvidia-ml-py")
    with MemoryMonitor() as monitor:
        if monitor.backend != "nvml":
            return Result("FAIL", f"the memory monitor picked {monitor.backend!r}, not NVML, on a CUDA machine")
        torch.cuda.empty_cache()
        before = monitor.sample()
        block = torch.ones(256 * MiB // 4, device=ctx.device)  # 256 MiB of float32
        torch.cuda.synchronize(ctx.device)
        after = monitor.sample()
        del block
    total = torch.cuda.get_device_properties(ctx.device).total_memory
    grew = (after.device_used_bytes or 0) - (before.device_used_bytes or 0)
    ok = (
        after.device_total_bytes is not None
        and 0.9 * total <= after.device_total_bytes <= 1.1 * total
        and 0 < (after.device_used_bytes or 0) <= after.device_total_bytes
        and 0.9 * 256 * MiB <= grew <= 1.5 * 256 * MiB
    )
    process = after.process_device_bytes
    process_text = "not listed (e.g. in a container)" if process is None else f"{process / MiB:.0f} MiB"
    if process is not None and process < (after.torch_reserved_bytes or 0):
        ok = False
    return Result(
        "PASS" if ok else "FAIL",
        f"NVML total {(after.device_total_bytes or 0) / MiB:.0f} MiB (torch: {total / MiB:.0f}), used "
        f"{(before.device_used_bytes or 0) / MiB:.0f} -> {(after.device_used_bytes or 0) / MiB:.0f} MiB "
        f"(+{grew / MiB:.0f} for a 256 MiB tensor); this process {process_text}, torch reserved "
        f"{(after.torch_reserved_bytes or 0) / MiB:.0f} MiB",
    )


# -- 3. bounded cache against plain transformers; eager against compiled -----------------------------------


@dataclass
class Greedy:
    tokens: list[int]
    logits: list[torch.Tensor]  # per token: the logits row [vocab] it was chosen from (float32, CPU)


def _greedy(runner: CachedRunner, logits: torch.Tensor, steps: int) -> Greedy:
    out = Greedy([], [])
    for _ in range(steps):
        out.logits.append(logits[0].float().cpu())
        out.tokens.append(int(logits.argmax(-1)))
        logits = runner.decode_step(out.tokens[-1])
    return out


def _until_eos(g: Greedy) -> Greedy:
    end = g.tokens.index(EOS) + 1 if EOS in g.tokens else len(g.tokens)
    return Greedy(g.tokens[:end], g.logits[:end])


def compare(ctx: Context, expected: Greedy, got: Greedy) -> tuple[bool, str]:
    """Greedy decodings agree: same tokens (or the same up to a near-tie) and logits within the tolerance."""
    worst = 0.0
    for i, (e, g) in enumerate(zip(expected.tokens, got.tokens, strict=False)):
        diff = float((expected.logits[i] - got.logits[i]).abs().max())
        tol = ctx.tolerance(expected.logits[i])
        if diff > tol:
            return False, f"logits of token {i} differ by {diff:.2e} (tolerance {tol:.1e})"
        worst = max(worst, diff)
        if e != g:
            margin = float(expected.logits[i][e] - expected.logits[i][g])
            if margin <= tol:  # the two tokens were within the dtype's rounding of each other: either is right
                return True, f"{i} tokens equal, then a near-tie (margin {margin:.1e}, logits {diff:.1e} apart)"
            return False, f"token {i}: {g} instead of {e} (margin {margin:.2e}, logits {diff:.1e} apart)"
    if len(expected.tokens) != len(got.tokens):
        return False, f"{len(got.tokens)} tokens instead of {len(expected.tokens)}"
    return True, f"{len(expected.tokens)} tokens equal, logits within {worst:.1e}"


def tiny_models(ctx: Context, arch: str) -> tuple[torch.nn.Module, torch.nn.Module, int]:
    """(reference on plain sdpa, the same weights on bounded_sdpa, position dims) on the device, in its dtype;
    built once per run, so that the checks share compiled graphs where their shapes agree."""
    if arch not in ctx.tiny:
        reference, bounded, dims = build_pair(arch)
        ctx.tiny[arch] = reference.to(ctx.device, ctx.dtype), bounded.to(ctx.device, ctx.dtype), dims
    return ctx.tiny[arch]


def _ids(ctx: Context, length: int, gen: torch.Generator) -> torch.Tensor:
    return torch.randint(3, VOCAB, (1, length), generator=gen).to(ctx.device)


def full_against_generate(ctx: Context, arch: str, tokens: int = 16) -> tuple[bool, str]:
    reference, bounded, dims = tiny_models(ctx, arch)
    prompt = _ids(ctx, 40, torch.Generator().manual_seed(1))
    with torch.inference_mode():
        out = reference.generate(
            input_ids=prompt,
            attention_mask=torch.ones_like(prompt),
            max_new_tokens=tokens,
            do_sample=False,
            eos_token_id=EOS,
            pad_token_id=PAD,
            return_dict_in_generate=True,
            output_logits=True,
        )
        expected = Greedy(out.sequences[0, prompt.shape[1] :].tolist(), [row[0].float().cpu() for row in out.logits])
        cache = BoundedCache.for_model(bounded, CacheConfig(policy="full", budget=4096, window=8))
        runner = CachedRunner(bounded, cache, position_dims=dims, chunk_size=16)
        got = _greedy(runner, runner.prefill(input_ids=prompt), tokens)
    return compare(ctx, _until_eos(expected), _until_eos(got))


def converse(ctx: Context, model, dims: int, compile_decode: bool, rounds: int = 4, answer: int = 6):
    """Prompts of 20..41 tokens into a 48-token inf-mllm cache (every one evicts), each answered greedily.
    Returns (the answers as one greedy decoding, the runner, steps that took the static path)."""
    budget = 48
    cache = BoundedCache.for_model(model, CacheConfig(policy="inf-mllm", budget=budget, window=8))
    runner = CachedRunner(model, cache, position_dims=dims, chunk_size=16, compile_decode=ctx.compile)
    gen = torch.Generator().manual_seed(3)
    answers, static_steps = Greedy([], []), 0
    with torch.inference_mode():
        for r in range(rounds):
            logits = runner.prefill(input_ids=_ids(ctx, 20 + 7 * r, gen), evict_to=budget - answer)
            for _ in range(answer):
                answers.logits.append(logits[0].float().cpu())
                answers.tokens.append(int(logits.argmax(-1)))
                static_steps += runner.decoder.can_step()
                logits = runner.decode_step(answers.tokens[-1])
    return answers, runner, static_steps


@dataclass
class GraphWatch:
    skips: int = 0
    reasons: list[str] = field(default_factory=list)
    graphs: int = 0

    def describe(self, ctx: Context) -> str:
        text = f"{self.graphs} graph(s) compiled"
        if ctx.cuda:
            text += f", CUDA graphs skipped {self.skips}x" + (f" ({self.reasons[0]})" if self.reasons else "")
        return text


class _Collect(logging.Handler):
    def __init__(self, into: list[str]) -> None:
        super().__init__(logging.WARNING)
        self.into = into

    def emit(self, record: logging.LogRecord) -> None:
        self.into.append(record.getMessage().split(". Found from")[0].splitlines()[0])


@contextlib.contextmanager
def watch_graphs() -> Iterator[GraphWatch]:
    """Counts what torch.compile did meanwhile: graphs compiled, CUDA graphs inductor skipped (and why)."""
    from torch._dynamo.utils import counters

    watch = GraphWatch()
    skips, graphs = counters["inductor"]["cudagraph_skips"], counters["stats"]["unique_graphs"]
    handler = _Collect(watch.reasons)
    loggers = [logging.getLogger("torch._inductor.cudagraph_utils.__cudagraphs")]
    for log in loggers:
        log.addHandler(handler)
    try:
        yield watch
    finally:
        for log in loggers:
            log.removeHandler(handler)
        watch.skips = counters["inductor"]["cudagraph_skips"] - skips
        watch.graphs = counters["stats"]["unique_graphs"] - graphs


def check_equivalence(ctx: Context) -> Result:
    ok, parts = True, []
    for arch in ARCHS:
        same, note = full_against_generate(ctx, arch)
        ok &= same
        parts.append(f"{arch} full = generate: {note}")
    _, model, dims = tiny_models(ctx, "qwen2-vl")
    eager, _, _ = converse(ctx, model, dims, compile_decode=False)
    with watch_graphs() as graphs:
        compiled, runner, static_steps = converse(ctx, model, dims, compile_decode=ctx.compile)
    same, note = compare(ctx, eager, compiled)
    stayed = runner.decoder.compiled == ctx.compile
    ok &= same and stayed and static_steps == len(eager.tokens) and not (ctx.cuda and graphs.skips)
    parts.append(
        f"inf-mllm eager = compiled: {note}, {runner.cache.evictions} evictions, {static_steps}/{len(eager.tokens)} "
        f"static steps, decoder.compiled {runner.decoder.compiled}, {graphs.describe(ctx)}"
    )
    return Result("PASS" if ok else "FAIL", "; ".join(parts))


# -- 4. N streams ------------------------------------------------------------------------------------------

# per stream: prompt lengths (the last one is its question) and answer tokens, as in tests/cache/test_batch_decode.py
STREAMS = [([30, 25], 7), ([60, 41, 12], 2), ([20], 5), ([90, 9], 9)]


def _stream(ctx: Context, model, dims: int, seed: int) -> tuple[CachedRunner, torch.Tensor]:
    prompts, steps = STREAMS[seed]
    config = CacheConfig(policy="inf-mllm", budget=48, window=8)
    cache = BoundedCache.for_model(model, config)
    runner = CachedRunner(model, cache, position_dims=dims, chunk_size=16, compile_decode=ctx.compile)
    gen = torch.Generator().manual_seed(seed)
    with torch.inference_mode():
        for i, length in enumerate(prompts):
            last = i == len(prompts) - 1
            logits = runner.prefill(input_ids=_ids(ctx, length, gen), evict_to=config.budget - steps if last else None)
    return runner, logits


def check_streams(ctx: Context) -> Result:
    results = [_streams_of(ctx, arch) for arch in BATCHED_ARCHS]
    ok = all(r.status == "PASS" for r in results)
    return Result("PASS" if ok else "FAIL", "; ".join(r.detail for r in results))


def _streams_of(ctx: Context, arch: str) -> Result:
    _, model, dims = tiny_models(ctx, arch)
    steps = [s for _, s in STREAMS]
    with torch.inference_mode():
        alone = [_greedy(*_stream(ctx, model, dims, i), steps[i]) for i in range(len(STREAMS))]
        made = [_stream(ctx, model, dims, i) for i in range(len(STREAMS))]
        with watch_graphs() as graphs:
            batch = BatchDecoder([runner for runner, _ in made])
            together = [Greedy([], []) for _ in made]
            logits = [lg for _, lg in made]
            for step in range(max(steps)):
                feed = [int(lg.argmax(-1)) if step < n else None for lg, n in zip(logits, steps, strict=True)]
                for row, token in enumerate(feed):
                    if token is not None:
                        together[row].tokens.append(token)
                        together[row].logits.append(logits[row][0].float().cpu())
                out = batch.step(feed)
                logits = [new if new is not None else old for new, old in zip(out, logits, strict=True)]
    notes = [compare(ctx, a, t) for a, t in zip(alone, together, strict=True)]
    ok = all(same for same, _ in notes) and batch.compiled == ctx.compile and batch.batched_steps > 0
    ok &= not (ctx.cuda and graphs.skips)
    failed = [f"stream {i}: {note}" for i, (same, note) in enumerate(notes) if not same]
    return Result(
        "PASS" if ok else "FAIL",
        f"{len(STREAMS)} streams ({arch}, inf-mllm), {sum(steps)} tokens: "
        + ("; ".join(failed) if failed else "each as decoded alone")
        + f"; {batch.batched_steps} batched steps, batch compiled {batch.compiled}, {graphs.describe(ctx)}",
    )


# -- 5. flat memory ----------------------------------------------------------------------------------------


def _slope(values: list[float]) -> float:
    """Least-squares slope per sample."""
    n = len(values)
    mean_x, mean_y = (n - 1) / 2, statistics.fmean(values)
    return sum((i - mean_x) * (v - mean_y) for i, v in enumerate(values)) / sum((i - mean_x) ** 2 for i in range(n))


def check_memory(ctx: Context, clips: int = 24, clip_tokens: int = 64, budget: int = 48, policy="inf-mllm") -> Result:
    """Clips of `clip_tokens` embeddings (prefilled in chunks of 16) into a `policy` cache of `budget`, a
    question answered every 4th clip; the device's bytes after each clip. After the budget filled and the first
    answer, they must stay flat: less than one clip's KV in all (what a cache that kept growing adds a clip)."""
    _, model, dims = tiny_models(ctx, "qwen2-vl")
    cache = BoundedCache.for_model(model, CacheConfig(policy=policy, budget=budget, window=8))
    runner = CachedRunner(model, cache, position_dims=dims, chunk_size=16, compile_decode=ctx.compile)
    hidden = model.config.get_text_config().hidden_size
    gen = torch.Generator().manual_seed(5)
    samples, settled_at = [], None
    with torch.inference_mode(), watch_graphs() as graphs:
        for i in range(clips):
            clip = (torch.randn(1, clip_tokens, hidden, generator=gen) * 0.02).to(ctx.device, ctx.dtype)
            runner.prefill(inputs_embeds=clip)
            if i % 4 == 3:
                token = int(runner.prefill(input_ids=_ids(ctx, 12, gen), evict_to=budget - 4).argmax(-1))
                for _ in range(4):
                    token = int(runner.decode_step(token).argmax(-1))
                if settled_at is None and cache.get_seq_length() >= budget - 8:
                    settled_at = i + 1
            ctx.sync()
            sample = {
                "reserved": sum(layer.reserved_bytes() for layer in cache.kv_layers),
                "rss": process_rss_bytes(),
                "tokens": cache.get_seq_length(),
            }
            if ctx.cuda:
                sample["allocated"] = torch.cuda.memory_allocated(ctx.device)
                sample["peak"] = torch.cuda.max_memory_allocated(ctx.device)
                torch.cuda.reset_peak_memory_stats(ctx.device)
            samples.append(sample)
    if settled_at is None or clips - settled_at < 4:
        return Result("FAIL", f"the cache never reached its budget ({cache.get_seq_length()} of {budget} tokens)")
    one_clip = clip_tokens * cache.kv_bytes() // cache.get_seq_length()  # keys and values of every layer
    after = samples[settled_at:]
    judged = ("allocated", "peak", "reserved") if ctx.cuda else ("reserved",)
    ok, parts = True, []
    for key in (*judged, "rss"):
        values = [s[key] for s in after]
        if key == "peak":  # the peak of each period of 4 clips: one of them has a question and its answer
            values = [max(values[j : j + 4]) for j in range(0, len(values), 4)]
        spread, slope = max(values) - min(values), _slope(values)
        flat = spread < one_clip and abs(slope) < one_clip / 100
        if key in judged:
            ok &= flat
        label = key if key in judged else "process RSS (not judged)"
        per = "4 clips" if key == "peak" else "clip"
        parts.append(f"{label} {values[0] / MiB:.2f} -> {values[-1] / MiB:.2f} MiB (spread {spread / 1024:.0f} KiB, "
                     f"{slope / 1024:+.1f} KiB/{per})")  # fmt: skip
    tokens = [s["tokens"] for s in after]
    ok &= max(tokens) <= budget
    return Result(
        "PASS" if ok else "FAIL",
        f"{clips} clips of {clip_tokens} tokens (one clip's KV {one_clip / 1024:.0f} KiB), budget {budget}, cache "
        f"{min(tokens)}-{max(tokens)} tokens over the last {len(after)} clips: "
        + "; ".join(parts)
        + f"; {graphs.describe(ctx)}",
    )


# -- 6. timings --------------------------------------------------------------------------------------------


def timing_model(ctx: Context) -> tuple[torch.nn.Module, str]:
    """The reference LM when it is set up, else a random model of the Qwen2-VL-2B decoder's shape."""
    from quality.lm import load_text_lm
    from quality.reference import ReferenceMissing, require_reference

    try:
        require_reference()
    except ReferenceMissing:
        from scripts.bench_cache import build_model

        return build_model("qwen2-1.5b", str(ctx.device), ctx.dtype), "qwen2-vl-2b"
    return load_text_lm("reference", device=str(ctx.device), dtype=ctx.dtype).model, "reference"


def device_bandwidth(ctx: Context) -> float:
    """Bytes per second a sum reads from a 1 GiB tensor on the device (median of 5)."""
    if not ctx.cuda:
        from scripts.bench_decode import read_bandwidth

        return read_bandwidth()[0]
    probe = torch.ones(2**28, device=ctx.device)
    times = []
    for _ in range(6):
        torch.cuda.synchronize(ctx.device)
        started = time.perf_counter()
        probe.sum()
        torch.cuda.synchronize(ctx.device)
        times.append(time.perf_counter() - started)
    return 2**30 / statistics.median(times[1:])


def _timed_runner(ctx: Context, model, compile_decode: bool, seed: int, room: int) -> tuple[CachedRunner, int]:
    """A stream at its budget (random keys, as bench_cache fills it) with a 32-token question prefilled."""
    from scripts.bench_cache import fill_cache

    cache = BoundedCache.for_model(model, CacheConfig(budget=ctx.budget, recall=256))
    runner = CachedRunner(model, cache, compile_decode=compile_decode)
    fill_cache(cache, model, ctx.budget)
    gen = torch.Generator().manual_seed(seed)
    question = torch.randint(100, model.config.vocab_size - 1, (1, 32), generator=gen).to(ctx.device)
    return runner, int(runner.prefill(input_ids=question, evict_to=ctx.budget - room).argmax(-1))


def _median_ms(ctx: Context, step: Callable[[], object], steps: int, warmup: int = 3) -> float:
    times = []
    for i in range(warmup + steps):
        ctx.sync()
        started = time.perf_counter()
        step()
        ctx.sync()
        if i >= warmup:
            times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def _measure(ctx: Context, model, compile_decode: bool, streams: int) -> tuple[float, float, bool, GraphWatch]:
    """One-stream step ms, batched step ms (N streams), whether both stayed compiled, what torch.compile did."""
    made = [_timed_runner(ctx, model, compile_decode, seed, room=2 * (ctx.steps + 3) + 4) for seed in range(streams)]
    (runner, token), tokens = made[0], [t for _, t in made]
    batch = BatchDecoder([r for r, _ in made])
    with watch_graphs() as graphs:
        # batched first: a pooled stream's own compiled step is then traced for the pool's strides (bench_streams)
        batched = _median_ms(ctx, lambda: batch.step(tokens), ctx.steps)
        one = _median_ms(ctx, lambda: runner.decode_step(token), ctx.steps)
    return one, batched, runner.decoder.compiled and batch.compiled, graphs


def check_timings(ctx: Context, streams: int = 8) -> Result:
    model, name = timing_model(ctx)
    if not ctx.cuda and ctx.dtype == torch.float32:
        from cache.cpu.layouts import tune_linear_layouts

        tune_linear_layouts(model)  # as the app does at start on a CPU
    weights, kv_token = weight_bytes(model), kv_bytes_per_token(model)
    span = ctx.budget + 256 + 1
    parts = []
    with torch.inference_mode():
        for compile_decode in (False, True) if ctx.compile else (False,):
            one, batched, compiled, graphs = _measure(ctx, model, compile_decode, streams)
            bandwidth = device_bandwidth(ctx)
            bound_one = (weights + kv_token * span) / bandwidth * 1000
            bound_n = (weights + streams * kv_token * span) / bandwidth * 1000
            mode = "eager" if not compile_decode else "compiled" if compiled else "compiled (fell back to eager)"
            parts.append(
                f"{mode}: one stream {one:.2f} ms ({one / bound_one:.1f}x its bound {bound_one:.2f}), N={streams} "
                f"batched {batched:.2f} ms ({batched / bound_n:.1f}x bound {bound_n:.2f}), aggregate "
                f"{streams * one / batched:.1f}x one stream, read {bandwidth / 1e9:.0f} GB/s"
                + (f", {graphs.describe(ctx)}" if compile_decode else "")
            )
    return Result("PASS", f"{name}, {ctx.dtype}, budget {ctx.budget}, recall 256: " + "; ".join(parts))


def next_commands(ctx: Context) -> list[str]:
    """The benchmark runs that make the README's GPU rows, with a note where a script cannot target the GPU yet."""
    on = f"--device {ctx.device} --dtype {str(ctx.dtype).removeprefix('torch.')}"
    runs = [
        ("bench_decode.py", "--model reference --contexts 1024 4096 16384 65536"),
        ("bench_decode.py", "--model qwen2-vl-2b --contexts 1024 4096 16384 65536 --variants full bounded"),
        ("bench_streams.py", "--part decode --model reference --decode eager compiled"),
        ("bench_streams.py", "--part decode --model qwen2-vl-2b --decode eager compiled"),
        ("bench_cache.py", "--shape qwen2-1.5b --contexts 1024 4096 16384 65536"),
    ]
    lines = []
    for script, args in runs:
        ready = "--device" in (SCRIPTS / script).read_text()
        line = f"python scripts/{script} {args}" + (f" {on}" if ready else "")
        lines.append(line + ("" if ready else "   # no --device option yet: it would run on the CPU"))
    return lines


# -- main --------------------------------------------------------------------------------------------------

CHECKS: list[tuple[str, Check]] = [
    ("device and dtype", check_device),
    ("NVML readings", check_nvml),
    ("bounded cache = transformers", check_equivalence),
    ("N streams batched", check_streams),
    ("flat memory", check_memory),
    ("timings", check_timings),
]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", default="cuda", help="cuda, cuda:N, or cpu for a dry run (default: cuda)")
    p.add_argument("--dtype", default="auto", choices=["auto", "bfloat16", "float16", "float32"],
                   help="default auto: bf16 on a GPU with native bf16, fp16 on one without, fp32 on a CPU")  # fmt: skip
    p.add_argument("--skip-timings", action="store_true", help="only the pass/fail checks")
    p.add_argument("--eager", action="store_true", help="do not compile the decode steps (checks the eager path)")
    p.add_argument("--steps", type=int, default=16, help="timed decode steps per measurement (median)")
    p.add_argument("--budget", type=int, default=2048, help="the timings' cache budget in tokens")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        device = resolve_device(args.device)
    except ValueError as e:
        print(f"check_gpu: {e}", file=sys.stderr)
        if str(args.device).startswith("cuda"):
            print(
                f"check_gpu: CUDA is not available here (torch {torch.__version__}, CUDA build: "
                f"{torch.version.cuda or 'no'}); for a dry run of the same checks on the CPU use: "
                "python scripts/check_gpu.py --device cpu",
                file=sys.stderr,
            )
        return 2
    ctx = Context(device, resolve_dtype(args.dtype, device), not args.eager, args.steps, args.budget)
    checks = [(n, c) for n, c in CHECKS if not (args.skip_timings and c is check_timings)]
    print(f"check_gpu: {len(checks)} checks on {device} in {ctx.dtype}" + ("" if ctx.compile else ", eager"))
    code = run_checks(checks, ctx)
    print(f"next, for the README's {'GPU' if ctx.cuda else 'device'} rows:")
    for line in next_commands(ctx):
        print(f"  {line}")
    return code


if __name__ == "__main__":
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    sys.exit(main())
