"""Summaries, Markdown tables, CSV and plots of the quality benchmark's rows."""

from __future__ import annotations

import csv
from collections import defaultdict
from pathlib import Path

CEILING = "full"


def write_csv(rows: list[dict], path: Path) -> None:
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def summarize_needles(rows: list[dict]) -> list[dict]:
    """One row per (protocol, policy, context): exact rate and mean answer log-prob over its samples."""
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for row in rows:
        groups[(row["protocol"], row["policy"], row["context_tokens"])].append(row)
    return [
        {
            "protocol": protocol,
            "policy": policy,
            "context_tokens": context,
            "samples": len(group),
            "exact_rate": round(sum(r["exact"] for r in group) / len(group), 3),
            "mean_logprob": round(sum(r["logprob"] for r in group) / len(group), 3),
            "mean_ttft_ms": round(sum(r.get("ttft_ms", 0.0) for r in group) / len(group), 1),
            "mean_recall_ms": round(sum(r.get("recall_ms", 0.0) for r in group) / len(group), 1),
            "mean_recalled_tokens": round(sum(r.get("recalled_tokens", 0) for r in group) / len(group), 1),
        }
        for (protocol, policy, context), group in groups.items()
    ]


def needle_table(summary: list[dict], protocol: str, budget: int) -> str:
    """Markdown: one row per policy (the full-attention ceiling first), one column per context."""
    mine = [r for r in summary if r["protocol"] == protocol]
    contexts = sorted({r["context_tokens"] for r in mine})
    policies = _ceiling_first(r["policy"] for r in mine)
    cell = {(r["policy"], r["context_tokens"]): r for r in mine}
    head = "| policy | " + " | ".join(f"{c:,} tok ({c / budget:.0f}x)" for c in contexts) + " |"
    lines = [head, "|---" * (len(contexts) + 1) + "|"]
    for policy in policies:
        cells = []
        for c in contexts:
            r = cell.get((policy, c))
            cells.append(f"{r['exact_rate'] * r['samples']:.0f}/{r['samples']} ({r['mean_logprob']:.2f})" if r else "")
        label = f"{policy} (ceiling)" if policy == CEILING else policy
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def recall_cost_table(summary: list[dict]) -> str:
    """Markdown: per recall run and context, the recall's cost (probe + ranking + copy) and its share of TTFT."""
    mine = sorted((r for r in summary if r["protocol"] == "stream" and r["mean_recalled_tokens"] > 0),
                  key=lambda r: (r["policy"], r["context_tokens"]))  # fmt: skip
    lines = ["| run | context | tokens recalled | recall ms | TTFT ms | recall share of TTFT |", "|---" * 6 + "|"]
    for r in mine:
        share = r["mean_recall_ms"] / r["mean_ttft_ms"] if r["mean_ttft_ms"] else 0.0
        lines.append(f"| {r['policy']} | {r['context_tokens']:,} | {r['mean_recalled_tokens']:.0f} | "
                     f"{r['mean_recall_ms']:.0f} | {r['mean_ttft_ms']:.0f} | {share:.0%} |")  # fmt: skip
    return "\n".join(lines)


def perplexity_table(rows: list[dict]) -> str:
    """Markdown: one row per run, one column per segment."""
    segments = sorted({r["segment_end"] for r in rows})
    runs = _ceiling_first(r["run"] for r in rows)
    cell = {(r["run"], r["segment_end"]): r["perplexity"] for r in rows}
    head = "| run | " + " | ".join(f"{s // 1024}K" for s in segments) + " |"
    lines = [head, "|---" * (len(segments) + 1) + "|"]
    for run in runs:
        cells = [f"{cell[(run, s)]:.0f}" if (run, s) in cell else "" for s in segments]
        lines.append(f"| {run} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _ceiling_first(names) -> list[str]:
    unique = list(dict.fromkeys(names))
    return sorted(unique, key=lambda name: (not name.startswith(CEILING), unique.index(name)))


def plot_needles(summary: list[dict], path: Path, title: str) -> None:
    plt = _pyplot()
    protocols = list(dict.fromkeys(r["protocol"] for r in summary))
    fig, axes = plt.subplots(2, len(protocols), figsize=(5.5 * len(protocols), 7), squeeze=False)
    for col, protocol in enumerate(protocols):
        mine = [r for r in summary if r["protocol"] == protocol]
        for policy in _ceiling_first(r["policy"] for r in mine):
            points = sorted((r["context_tokens"], r) for r in mine if r["policy"] == policy)
            x = [c for c, _ in points]
            style = {"color": "black", "linestyle": "--"} if policy == CEILING else {}
            axes[0][col].plot(x, [r["exact_rate"] for _, r in points], marker="o", label=policy, **style)
            axes[1][col].plot(x, [r["mean_logprob"] for _, r in points], marker="o", label=policy, **style)
        axes[0][col].set_title(protocol)
        axes[0][col].set_ylabel("exact continuation rate")
        axes[1][col].set_ylabel("mean log-prob of the answer")
        for ax in axes[:, col]:
            ax.set_xscale("log", base=2)
            ax.set_xlabel("context tokens")
            ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize=8)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_perplexity(rows: list[dict], path: Path, title: str, trained_context: int | None) -> None:
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for run in _ceiling_first(r["run"] for r in rows):
        points = sorted((r["segment_end"], r["perplexity"]) for r in rows if r["run"] == run)
        style = {"color": "black", "linestyle": "--"} if run.startswith(CEILING) else {}
        ax.plot([p[0] for p in points], [p[1] for p in points], marker="o", label=run, **style)
    if trained_context:
        ax.axvline(trained_context, color="grey", linestyle=":", label=f"trained context ({trained_context:,})")
    ax.set_yscale("log")
    ax.set_xlabel("tokens streamed (end of each segment)")
    ax.set_ylabel("perplexity of the segment")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt
