"""int8 weights on the CPU, measured before any is shipped: speed on the Qwen2-VL-2B shapes, quality on the real LM.

Speed: the linear layers of one Qwen2-VL-2B decoder layer (q, k, v, o, gate, up, down) and of one vision-tower
block (qkv, proj, fc1, fc2), random weights, multiplied by 1 row (a decode step), 256 rows (a clip's visual tokens
entering the decoder) and 1024 rows (a 4-frame clip's patches in the vision tower), each way:
- `fp32`: `nn.Linear` as loaded (MKL);
- `fp32 one-row kernel`: the project's AVX2 kernel (cache.cpu.kernels), decode rows only, where built;
- `int8 dynamic`: `torch.ao.quantization.quantize_dynamic`, int8 weights per output channel, each input row
  quantized as it comes (FBGEMM; the API PyTorch marks deprecated);
- `torchao int8 weight-only` and `torchao int8 dynamic`: torchao's `quantize_` configs, when torchao is installed;
- `--quantize int8 (kernel)`: what `--quantize int8` runs: `cache.cpu.int8_linear.Int8Linear`, each row quantized
  with a scale per 64 inputs, int8 x int8 -> int32 in the project's AVX2 kernel;
- `int8 per token (torch._int_mm)`: the same integers in PyTorch's one CPU int8 product, at most 3 passes.
Quality: perplexity of the reference LM (SmolLM2-135M-Instruct, quality/reference.py) over `--tokens` tokens of
three passages (Paradise Lost from its start and from token 20,000, Hamlet from token 30,000; a quick run takes 192
tokens of the first), full attention, fp32 against:
- int8 dynamic (FBGEMM) on every linear layer, sparing the MLP's down projections (where activation outliers live)
  and the LM head, and after SmoothQuant's rescaling (each input channel divided by `s = a^0.65 / w^0.35`, the
  weight's column multiplied by it; `a` the channel's largest |input| over 1,024 tokens of Hamlet's start (512 in a
  quick run), `w` the column's largest |weight|);
- int8 with one scale per input row, emulated (the integers multiplied exactly in fp32), with and without the
  rescaling: where a per-row kernel would have been;
- `--quantize int8`: the project's kernel, a scale per 64 inputs of a row, no calibration.

    python scripts/bench_int8.py                      # docs/int8_bench.csv and .png
    python scripts/bench_int8.py --quick --out /tmp/x # what the test runs
"""

from __future__ import annotations

import argparse
import copy
import csv
import os
import statistics
import sys
import time
import warnings
from pathlib import Path

import torch
from tqdm import tqdm

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cache.config import CacheConfig  # noqa: E402
from cache.cpu.int8_linear import Int8Linear, quantize_weight  # noqa: E402
from cache.cpu.kernels import kernels_ready  # noqa: E402
from model.quantize import quantize_model  # noqa: E402
from scripts.bench_families import PROBE_FLOATS, QUICK_PROBE_FLOATS, bandwidth  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
COLUMNS = ["part", "variant", "rows", "measure", "value", "unit", "note"]
# (name, out_features, in_features): Qwen2-VL-2B's decoder (hidden 1536, 12 query / 2 KV heads of 128,
# intermediate 8960) and its vision tower (embed 1280, 16 heads, MLP 5120)
DECODER = [("q", 1536, 1536), ("k", 256, 1536), ("v", 256, 1536), ("o", 1536, 1536),
           ("gate", 8960, 1536), ("up", 8960, 1536), ("down", 1536, 8960)]  # fmt: skip
VISION = [("qkv", 3840, 1280), ("proj", 1280, 1280), ("fc1", 5120, 1280), ("fc2", 1280, 5120)]
SPARED = ("down_proj", "lm_head")
SMOOTH_ALPHA = 0.65  # SmoothQuant's migration strength (0.5-0.8 usual; 0.65 was best of 0.5, 0.65, 0.8 here)
KERNEL = "--quantize int8 (kernel)"  # per token, a scale per 64 inputs: cache.cpu.int8_linear
# (text, first token) of each perplexity passage: three in a full run, the first in a quick one
PASSAGES = [("paradise-lost", 0), ("paradise-lost", 20000), ("hamlet", 30000)]
CALIBRATION = ("hamlet", 1024)  # (text, tokens) the inputs' ranges are read from: not the evaluated text
QUICK_CALIBRATION = 512  # --quick: the first 512 tokens of it
FULL_ROWS = {"decoder layer": [1, 256], "vision block": [1024]}


def layer_stack(shapes: list[tuple[str, int, int]]) -> torch.nn.ModuleDict:
    torch.manual_seed(0)
    return torch.nn.ModuleDict({name: torch.nn.Linear(i, o) for name, o, i in shapes})


def int8_dynamic(module: torch.nn.Module, skip: tuple[str, ...] = (), copy_first: bool = True) -> torch.nn.Module:
    """A copy of `module` (or `module` itself, `copy_first=False`) with its linear layers int8 dynamic (FBGEMM)."""
    from torch.ao.quantization import per_channel_dynamic_qconfig, quantize_dynamic

    torch.backends.quantized.engine = "fbgemm"
    names = [n for n, m in module.named_modules() if type(m) is torch.nn.Linear and not n.endswith(skip)]
    quantized = copy.deepcopy(module) if copy_first else module
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the API's deprecation notices, one per layer
        quantize_dynamic(quantized, dict.fromkeys(names, per_channel_dynamic_qconfig), torch.qint8, inplace=True)
    return quantized


def input_peaks(model: torch.nn.Module, input_ids: torch.Tensor) -> dict[str, torch.Tensor]:
    """Every linear layer's largest |input| per channel over one pass of `input_ids` (SmoothQuant's calibration)."""
    peaks: dict[str, torch.Tensor] = {}

    def recorder(name: str):
        def record(module, inputs):
            peak = inputs[0].detach().reshape(-1, inputs[0].shape[-1]).abs().amax(0)
            peaks[name] = torch.maximum(peaks[name], peak) if name in peaks else peak

        return record

    handles = [m.register_forward_pre_hook(recorder(n)) for n, m in model.named_modules() if type(m) is torch.nn.Linear]
    try:
        with torch.inference_mode():
            model(input_ids)
    finally:
        for handle in handles:
            handle.remove()
    return peaks


def smoothing(weight: torch.Tensor, peak: torch.Tensor | None, alpha: float = SMOOTH_ALPHA) -> torch.Tensor:
    """SmoothQuant's factor per input channel: inputs are divided by it, the weight's columns multiplied."""
    if peak is None:
        return torch.ones(weight.shape[1])
    columns = weight.abs().amax(0).clamp(min=1e-5)
    return (peak.clamp(min=1e-5).pow(alpha) / columns.pow(1 - alpha)).clamp(min=1e-5)


class Rescaled(torch.nn.Module):
    """`inner` (made from the weight times s) fed the input divided by s."""

    def __init__(self, inner: torch.nn.Module, factor: torch.Tensor) -> None:
        super().__init__()
        self.inner = inner
        self.register_buffer("inverse", 1.0 / factor)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.inner(x * self.inverse)


def replace_linears(model: torch.nn.Module, make, ranges: dict[str, torch.Tensor] | None) -> torch.nn.Module:
    """A copy of `model` with each linear layer made by `make(linear)`, rescaled first where `ranges` are given."""
    model = copy.deepcopy(model)
    for name in [n for n, m in model.named_modules() if type(m) is torch.nn.Linear]:
        parent_name, _, child = name.rpartition(".")
        parent = model.get_submodule(parent_name) if parent_name else model
        linear = getattr(parent, child)
        factor = smoothing(linear.weight.detach(), None if ranges is None else ranges[name])
        scaled = torch.nn.utils.skip_init(  # its weights are set below: no random initialisation first
            torch.nn.Linear, linear.in_features, linear.out_features, bias=linear.bias is not None
        )
        scaled.weight.data = linear.weight.detach() * factor
        if linear.bias is not None:
            scaled.bias.data = linear.bias.detach().clone()
        setattr(parent, child, Rescaled(make(scaled), factor) if ranges is not None else make(scaled))
    return model


class PerRowInt8(torch.nn.Module):
    """int8 with one scale per input row (not per group), emulated: the integers multiplied exactly in fp32."""

    def __init__(self, linear: torch.nn.Linear) -> None:
        super().__init__()
        self.weight_q, self.weight_scale = quantize_weight(linear.weight.detach())
        self.bias = linear.bias

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        scale = x.abs().amax(-1, keepdim=True).clamp(min=1e-12) / 127
        y = (torch.round(x / scale).clamp(-127, 127) @ self.weight_q.float().t()) * scale * self.weight_scale
        return y if self.bias is None else y + self.bias


def shipped(model: torch.nn.Module) -> torch.nn.Module:
    """What `--quantize int8` does: every linear layer an `Int8Linear` (the project's kernel)."""
    model = copy.deepcopy(model)
    quantize_model(model)
    return model


def fbgemm_linear(linear: torch.nn.Linear) -> torch.nn.Module:
    return int8_dynamic(torch.nn.Sequential(linear), copy_first=False)[0]  # a fresh linear: no copy needed


class IntMmStack:
    """A stack's layers as int8 per token through `torch._int_mm` (each row its own scale)."""

    def __init__(self, stack: torch.nn.ModuleDict) -> None:
        self.layers = {}
        for name, linear in stack.items():
            weight = linear.weight.detach()
            scale = weight.abs().amax(1).clamp(min=1e-8) / 127
            self.layers[name] = (torch.round(weight / scale[:, None]).clamp(-127, 127).to(torch.int8).t(), scale)

    def __getitem__(self, name: str):
        weight_t, weight_scale = self.layers[name]

        def run(x: torch.Tensor) -> torch.Tensor:
            scale = x.abs().amax(-1, keepdim=True).clamp(min=1e-8) / 127
            rows = torch.round(x / scale).clamp(-127, 127).to(torch.int8)
            if rows.shape[0] <= 16:  # torch._int_mm takes more than 16 rows: pad (the cost of a few rows)
                rows = torch.cat([rows, rows.new_zeros(17 - rows.shape[0], rows.shape[1])])
            return torch._int_mm(rows, weight_t)[: x.shape[0]].float() * scale * weight_scale

        return run


def torchao_variants(module: torch.nn.Module) -> dict[str, torch.nn.Module]:
    try:
        from torchao.quantization import Int8DynamicActivationInt8WeightConfig, Int8WeightOnlyConfig, quantize_
    except ImportError:
        return {}
    found = {}
    for label, config in (("torchao int8 weight-only", Int8WeightOnlyConfig()),
                          ("torchao int8 dynamic", Int8DynamicActivationInt8WeightConfig())):  # fmt: skip
        copied = copy.deepcopy(module)
        quantize_(copied, config)
        found[label] = copied
    return found


def per_token_stack(stack: torch.nn.ModuleDict) -> torch.nn.ModuleDict:
    return torch.nn.ModuleDict({name: Int8Linear.from_linear(linear) for name, linear in stack.items()})


class OneRowKernel(torch.nn.Module):
    """The same layers through the project's one-row AVX2 kernel (decode rows only)."""

    def __init__(self, stack: torch.nn.ModuleDict) -> None:
        super().__init__()
        self.stack = stack

    def forward_layer(self, name: str, x: torch.Tensor) -> torch.Tensor:
        layer = self.stack[name]
        return torch.ops.edge_assistant.one_row_linear(x, layer.weight, layer.bias)


def time_stack(variant, shapes, rows: int, repeats: int) -> float:
    """Median ms of one pass through every layer of the stack (each on its own input of `rows` rows)."""
    inputs = {name: torch.randn(rows, i) for name, _, i in shapes}
    call = variant.forward_layer if isinstance(variant, OneRowKernel) else (lambda n, x: variant[n](x))
    times = []
    with torch.inference_mode():
        for name, _, _ in shapes:
            call(name, inputs[name])  # warm-up
        for _ in range(repeats):
            start = time.perf_counter()
            for name, _, _ in shapes:
                call(name, inputs[name])
            times.append(1000 * (time.perf_counter() - start))
    return statistics.median(times)


def max_error(variant, reference: torch.nn.ModuleDict, shapes) -> float:
    """The largest |difference| over a 4-row product, relative to the largest |fp32 output| (per layer, max)."""
    worst = 0.0
    call = variant.forward_layer if isinstance(variant, OneRowKernel) else (lambda n, x: variant[n](x))
    with torch.inference_mode():
        for name, _, i in shapes:
            x = torch.randn(4 if not isinstance(variant, OneRowKernel) else 1, i)
            want = reference[name](x)
            worst = max(worst, float((call(name, x) - want).abs().max() / want.abs().max()))
    return worst


def measure_speed(rows_by_part: dict[str, list[int]], repeats: int, slow_variants: bool, bar: tqdm) -> list[dict]:
    floats = PROBE_FLOATS if slow_variants else QUICK_PROBE_FLOATS  # a quick run: 128 MiB
    _, read = bandwidth(floats=floats)  # bytes/s a torch sum reads: a decode step cannot read its weights faster
    note = f"torch sum over {floats * 4 // 2**20} MiB"
    out = [_row("bound", "read bandwidth", 0, "read_gb_per_s", read / 1e9, "GB/s", note)]
    weights = sum(o * i for _, o, i in DECODER)
    for label, size in (("fp32", 4), ("int8", 1)):  # the decoder layer's weights read once: 1 row's bound
        note = f"{weights / 1e6:.1f}M weights x {size} B at the read bandwidth"
        out.append(_row("bound: decoder layer", label, 1, "bound_ms", 1000 * weights * size / read, "ms", note))
    for part, shapes in (("decoder layer", DECODER), ("vision block", VISION)):
        stack = layer_stack(shapes)
        variants: dict[str, object] = {"fp32": stack, "int8 dynamic": int8_dynamic(stack),
                                       KERNEL: per_token_stack(stack)}  # fmt: skip
        if kernels_ready():
            variants["fp32 one-row kernel"] = OneRowKernel(stack)
        if slow_variants:
            variants.update(torchao_variants(stack))
            variants["int8 per token (torch._int_mm)"] = IntMmStack(stack)
        weights = sum(o * i for _, o, i in shapes)
        for label, variant in variants.items():
            error = max_error(variant, stack, shapes)
            for rows in rows_by_part[part]:
                if isinstance(variant, OneRowKernel) and rows > 16:
                    continue
                slow = label.startswith(("torchao", "int8 per token (torch"))  # seconds per pass here: 3 passes tell
                ms = time_stack(variant, shapes, rows, min(repeats, 3) if slow else repeats)
                note = f"{weights / 1e6:.1f}M weights; max relative error {error:.4f}"
                out.append(_row(f"speed: {part}", label, rows, "ms", ms, "ms", note))
                bar.update()
    return out


def measure_quality(
    tokens: int, passages: list[tuple[str, int]], bar: tqdm, calibration: int = CALIBRATION[1]
) -> list[dict]:
    from quality.lm import load_text_lm
    from quality.perplexity import stream_perplexity
    from quality.reference import load_text

    lm = load_text_lm()
    config = CacheConfig(policy="full", budget=tokens + 1)
    ranges = input_peaks(lm.model, torch.tensor([lm.encode(load_text(CALIBRATION[0]))[:calibration]]))
    models = {"fp32": lm.model, "int8 dynamic": int8_dynamic(lm.model),
              "int8 dynamic, sparing down_proj and lm_head": int8_dynamic(lm.model, SPARED),
              "int8 dynamic + SmoothQuant": replace_linears(lm.model, fbgemm_linear, ranges),
              "int8 one scale per row (emulated)": replace_linears(lm.model, PerRowInt8, None),
              "int8 one scale per row + SmoothQuant (emulated)": replace_linears(lm.model, PerRowInt8, ranges),
              KERNEL: shipped(lm.model)}  # fmt: skip
    out = []
    for text, start in passages:
        ids = lm.encode(load_text(text))[start : start + tokens]
        base = None
        for label, model in models.items():
            lm.model = model
            began = time.perf_counter()
            ppl = stream_perplexity(lm, ids, config, chunk=256, segment=tokens)[0]
            seconds = time.perf_counter() - began
            base = base or ppl
            part = f"quality: {text} from token {start}"
            note = f"{tokens} tokens, full attention; {seconds:.1f} s"
            out.append(_row(part, label, tokens, "perplexity", ppl, "ppl", note))
            out.append(_row(part, label, tokens, "perplexity_vs_fp32", ppl / base, "x", "tolerance: 1.03"))
            bar.update()
    return out


def _row(part, variant, rows, measure, value, unit, note="") -> dict:
    return {"part": part, "variant": variant, "rows": rows, "measure": measure, "value": round(value, 4),
            "unit": unit, "note": note}  # fmt: skip


def machine() -> str:
    one, five, _ = os.getloadavg()
    return f"{os.cpu_count()} cores, torch {torch.__version__}; load average {one:.1f} (5 min: {five:.1f})"


def plot(rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    speed = [r for r in rows if r["part"].startswith("speed")]
    groups = sorted({(r["part"].removeprefix("speed: "), r["rows"]) for r in speed}, key=lambda g: (g[0], g[1]))
    variants = list(dict.fromkeys(r["variant"] for r in speed))
    fig, axes = plt.subplots(1, 2, figsize=(13, 4.5), gridspec_kw={"width_ratios": [2.2, 1]})
    width = 0.8 / max(len(variants), 1)
    for k, variant in enumerate(variants):
        values = []
        for part, n in groups:
            base = next(r["value"] for r in speed if r["variant"] == "fp32" and r["rows"] == n and part in r["part"])
            mine = next((r["value"] for r in speed if r["variant"] == variant and r["rows"] == n and part in r["part"]),
                        None)  # fmt: skip
            values.append(0 if mine is None else base / mine)
        axes[0].bar([g + k * width for g in range(len(groups))], values, width, label=variant)
    axes[0].axhline(1, color="black", lw=0.8)
    axes[0].set_xticks([g + width * (len(variants) - 1) / 2 for g in range(len(groups))])
    axes[0].set_xticklabels([f"{part}\n{n} row(s)" for part, n in groups], fontsize=8)
    axes[0].set_yscale("log")
    axes[0].set_ylabel("speed-up over fp32 MKL (x, log)")
    axes[0].legend(fontsize=7)
    quality = [r for r in rows if r["measure"] == "perplexity_vs_fp32"]
    axes[1].barh([r["variant"].replace(", ", ",\n") for r in quality], [r["value"] for r in quality])
    axes[1].axvline(1.03, color="tab:red", ls="--", label="tolerance 1.03")
    axes[1].set_xlabel("perplexity / fp32's (reference LM)")
    axes[1].legend(fontsize=7)
    fig.suptitle(f"int8 on the CPU (scripts/bench_int8.py); {machine()}", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tokens", type=int, default=2048, help="tokens of the perplexity text (default: 2048)")
    p.add_argument("--repeats", type=int, default=20, help="timed passes per setting, median kept (default: 20)")
    p.add_argument("--quick", action="store_true", help="a short run (for the test): 192 tokens of one passage, "
                   "512 of calibration, 1 pass, 1 decoder row and 256 vision rows, a 128 MiB bandwidth probe, neither "
                   "torchao nor torch._int_mm")  # fmt: skip
    p.add_argument("--out", type=Path, default=REPO / "docs", help="folder of int8_bench.csv and .png")
    args = p.parse_args(argv)
    if args.tokens < 16 or args.repeats < 1:
        p.error("--tokens must be >= 16 and --repeats >= 1")
    if args.quick:
        args.tokens, args.repeats = 192, 1
    return args


def main(argv: list[str] | None = None) -> list[dict]:
    args = parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    kernels_ready()  # builds them the first time (once per machine)
    rows_by_part = {"decoder layer": [1], "vision block": [256]} if args.quick else FULL_ROWS
    speed_steps = sum(len(v) for v in rows_by_part.values()) * (4 if args.quick else 7)
    passages = PASSAGES[:1] if args.quick else PASSAGES
    with tqdm(total=speed_steps + 7 * len(passages), desc="bench_int8", unit="setting") as bar:
        rows = measure_speed(rows_by_part, args.repeats, not args.quick, bar)
        rows += measure_quality(args.tokens, passages, bar, QUICK_CALIBRATION if args.quick else CALIBRATION[1])
    with (args.out / "int8_bench.csv").open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=COLUMNS)
        writer.writeheader()
        writer.writerows(rows)
    plot(rows, args.out / "int8_bench.png")
    print(f"Machine: {machine()}")
    for r in rows:
        print(f"{r['part']:<22} {r['variant']:<44} {r['rows']:>5} {r['measure']:<20} {r['value']:>10} {r['unit']}")
    print(f"wrote {args.out / 'int8_bench.csv'}")
    return rows


if __name__ == "__main__":
    main()
