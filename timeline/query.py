"""A person's words as a safe FTS5 MATCH expression (SQLite), and the ranking every backend shares.

Words are taken with a Unicode-aware `\\w+` (so quotes, `*`, `(`, `:`, `^`, `-` and every other FTS5 operator
character are separators and never reach FTS5), lower-cased, stopwords dropped, and each is written as a quoted
string ("near", "or" are then plain words, not operators); they are OR'd, so a moment matching any word is
found and bm25 puts the ones matching more (and rarer) words first.
"""

from __future__ import annotations

import re

MAX_TERMS = 16
# A search's text, in characters: far above any question typed (the page's box, `history TEXT`), far below what
# costs a server real time (a 1 MB quoted phrase took PostgreSQL about 13 s of CPU).
MAX_SEARCH_CHARS = 1000
WORD = re.compile(r"\w+")
STOPWORDS = frozenset(
    """a about above after again all am an and any are as at be been before being below between both but by can
    could did do does doing done down during each few for from had has have having he her here hers him his how i
    if in into is it its itself just me more most my no nor not now of off on once only or other our ours out over
    own same she should so some such than that the their theirs them then there these they this those through to
    too under until up very was we were what when where which while who whom why will with would you your yours
    anything something someone anyone see seen saw happen happened happening show tell""".split()
)


def fts_query(text: str) -> str | None:
    """The MATCH expression for `text` (`"truck" OR "door"`), or None when it holds no word at all. When every
    word is a stopword ("what is it?"), the words themselves are used."""
    words = list(dict.fromkeys(word.lower() for word in WORD.findall(text)))
    if not words:
        return None
    terms = [word for word in words if word not in STOPWORDS] or words
    return " OR ".join(f'"{term}"' for term in terms[:MAX_TERMS])


# Ranking, the same for every backend: a text match's relevance (negative; lower is better) times a recency boost.
RECENCY_WEIGHT = 1.0
RECENCY_HALF_LIFE_S = 86400.0


def recency_boost(age_s: float) -> float:
    """`1 + RECENCY_WEIGHT * 0.5 ** (age / RECENCY_HALF_LIFE_S)`: up to 2 for a row written now, 1.5 a day old."""
    return 1.0 + RECENCY_WEIGHT * 0.5 ** (max(age_s, 0.0) / RECENCY_HALF_LIFE_S)
