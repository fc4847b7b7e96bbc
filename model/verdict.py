"""A yes/no verdict from the model's own probabilities, cheaply: one forward of the question over the cache,
no text generated, and the question taken out of the cache again.

    p_yes = yes_probability(logits, YesNo.of(tokenizer))     # logits: [1, vocab] after the assistant header

p_yes is the probability mass of the first answer token on the tokenizer's spellings of "yes", normalised over
those of "yes" and "no" (so a model that would rather say "Sure" still gets a verdict between the two). Real
tokenizers have each spelling as one token; where one is split (the tiny test tokenizer), its first token
stands for it, unless that token also starts a no (a bare space, say): such tokens count for neither.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

YES_SPELLINGS = ("yes", "Yes", "YES", " yes", " Yes", " YES")
NO_SPELLINGS = ("no", "No", "NO", " no", " No", " NO")
CHECK_SUFFIX = " Answer yes or no."


@dataclass(frozen=True)
class YesNo:
    """The token ids that start a yes or a no answer (the first token of every spelling)."""

    yes: tuple[int, ...]
    no: tuple[int, ...]

    @classmethod
    def of(cls, tokenizer) -> YesNo:
        yes, no = _first_tokens(tokenizer, YES_SPELLINGS), _first_tokens(tokenizer, NO_SPELLINGS)
        both = set(yes) & set(no)
        found = cls(tuple(t for t in yes if t not in both), tuple(t for t in no if t not in both))
        if not found.yes or not found.no:
            raise ValueError("this tokenizer cannot tell a 'yes' from a 'no' by its first token: no watches")
        return found


@dataclass(frozen=True)
class Verdict:
    """One check of a watch: p_yes, what it cost (ms) and how many prompt tokens it ran."""

    p_yes: float
    ms: float
    prompt_tokens: int


def _first_tokens(tokenizer, spellings: tuple[str, ...]) -> tuple[int, ...]:
    ids = []
    for text in spellings:
        first = tokenizer.encode(text, add_special_tokens=False)[0]
        if first not in ids:
            ids.append(first)
    return tuple(ids)


def yes_probability(logits: torch.Tensor, tokens: YesNo) -> float:
    """P(yes) / (P(yes) + P(no)) of the next token, from its logits ([1, vocab] or [vocab])."""
    logits = logits.reshape(-1).double()
    yes = torch.logsumexp(logits[list(tokens.yes)], dim=0)
    no = torch.logsumexp(logits[list(tokens.no)], dim=0)
    return float(torch.sigmoid(yes - no))


def check_question(question: str) -> str:
    """The watch's question as the model is asked it: a yes/no answer requested."""
    question = question.strip()
    return question if question.lower().endswith(CHECK_SUFFIX.strip().lower()) else question + CHECK_SUFFIX
