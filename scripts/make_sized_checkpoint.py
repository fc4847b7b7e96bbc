"""A model directory of a supported checkpoint at its published sizes, with random weights: `--model DIR` then
runs the app at the real model's cost (memory, speed) without the hub. Answers are gibberish.

    python scripts/make_sized_checkpoint.py Qwen/Qwen2-VL-2B-Instruct /tmp/qwen2-vl-2b        # bf16 on disk
    python scripts/make_sized_checkpoint.py Qwen/Qwen3.5-0.8B /tmp/qwen3.5-0.8b --device cuda  # built on a GPU

The published files come from the hub fixture (tests/fixtures/hub: config, processor, chat template, special
tokens; a small stand-in vocabulary); the sizes the fixture shrinks are put back as scripts/bench_families.py
does (its PUBLISHED table); the weights are random, drawn where --device says (a GPU draws 2B parameters in a
second, a CPU in tens), and saved with `save_pretrained` in --dtype.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from model.families import FAMILIES  # noqa: E402
from scripts.bench_families import PUBLISHED, full_config  # noqa: E402
from tests.support.hub_fixture import materialize  # noqa: E402


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("hub_id", choices=sorted(PUBLISHED), help="the checkpoint whose sizes to build")
    p.add_argument("out", type=Path, help="the model directory to write (must not exist)")
    p.add_argument("--dtype", choices=["bfloat16", "float16", "float32"], default="bfloat16", help="on disk")
    p.add_argument("--device", default="cpu", help="where the random weights are drawn (cpu or cuda)")
    args = p.parse_args(argv)
    if args.out.exists():
        p.error(f"{args.out} exists: give a new directory")
    return args


def main(argv: list[str] | None = None) -> Path:
    args = parse_args(argv)
    materialize(args.hub_id, args.out)  # the fixture's published small files (and its shrunk weights)
    for f in list(args.out.glob("*.safetensors")) + list(args.out.glob("*.safetensors.index.json")):
        f.unlink()  # the shrunk weights: replaced below
    generation = (args.out / "generation_config.json").read_bytes()
    config = full_config(args.hub_id, args.out)
    with torch.device(args.device), torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = FAMILIES[config.model_type].model_class(config)
    model.to(getattr(torch, args.dtype)).save_pretrained(args.out)
    (args.out / "generation_config.json").write_bytes(generation)  # the published one, not the model's default
    params = sum(p.numel() for p in model.parameters())
    size = sum(f.stat().st_size for f in args.out.iterdir())
    print(f"wrote {args.out}: {args.hub_id} at its published sizes, {params / 1e9:.2f} B random parameters, "
          f"{args.dtype}, {size / 2**30:.2f} GiB")  # fmt: skip
    return args.out


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        sys.exit(130)
