"""Plot memory and KV-cache tokens over stream time from one or more `--log-jsonl` event logs.

    python scripts/plot_log.py out/run-inf-mllm.jsonl out/run-full.jsonl --out out/memory.png

Each log becomes one line per panel, labelled by its file name: process memory (RSS, or device memory
when the answers carry it), KV-cache bytes and cache tokens, all per answer round, against stream time.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def read_answers(path: Path) -> list[dict]:
    answers = []
    with path.open(encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            try:
                event = json.loads(line)
            except json.JSONDecodeError as err:
                raise SystemExit(f"{path}:{number}: not a JSON line ({err})") from None
            if event.get("type") == "answer":
                answers.append(event)
    return answers


def memory_of(answer: dict) -> tuple[float, str]:
    if answer.get("device_mem_bytes"):
        return answer["device_mem_bytes"] / 2**20, "device memory MiB (torch)"
    return answer["process_rss_bytes"] / 2**20, "process RSS MiB"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("logs", nargs="+", type=Path, help="JSON-lines event logs written by --log-jsonl")
    parser.add_argument("--out", type=Path, default=Path("out/memory.png"), help="PNG to write")
    parser.add_argument("--title", default="memory over a stream")
    args = parser.parse_args(argv)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax_mem, ax_kv, ax_tok) = plt.subplots(1, 3, figsize=(16, 4))
    memory_label = "memory MiB"
    for path in args.logs:
        if not path.is_file():
            print(f"error: no such log file: {path}", file=sys.stderr)
            return 2
        answers = read_answers(path)
        if not answers:
            print(f"error: {path} has no answer events (was the run long enough for --every?)", file=sys.stderr)
            return 2
        t = [a["stream_time"] / 60 for a in answers]
        memory = [memory_of(a) for a in answers]
        memory_label = memory[0][1]
        ax_mem.plot(t, [m for m, _ in memory], label=path.stem)
        ax_kv.plot(t, [a["kv_bytes"] / 2**20 for a in answers], label=path.stem)
        ax_tok.plot(t, [a["cache_tokens_end"] for a in answers], label=path.stem)
    for ax, label in ((ax_mem, memory_label), (ax_kv, "KV cache MiB"), (ax_tok, "cache tokens after the answer")):
        ax.set_xlabel("stream time (min)")
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
        ax.legend()
    fig.suptitle(args.title)
    fig.tight_layout()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(args.out, dpi=110)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
