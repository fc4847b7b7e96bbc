"""One policy of each eviction behaviour, for the suites that run whole models.

Seven policies share four behaviours (`EvictionPolicy.behaviour`: what they capture, whether they evict, whether
heads choose apart): nothing captured and one choice for all heads (streaming-llm, window, strided), a window of
attention captured and a choice per head (inf-mllm, snapkv), attention accumulated per head (h2o), and no eviction
(full). The cache, decode and batch code branch on the behaviour only, so the heavy suites (equivalence with
transformers, bounded long streams, batched decoding) run the first registered policy of each behaviour; what each
policy's `score` keeps is tested for every policy on a token view without a model
(tests/cache/test_every_policy_selects.py). A new policy of a known behaviour adds no heavy test item.
"""

from __future__ import annotations

from cache.policies import POLICIES


def one_policy_per_behaviour(evicting_only: bool = False) -> list[str]:
    """The first registered policy of each behaviour, in registry order (evicting ones only, if asked)."""
    first: dict[tuple, str] = {}
    for name, cls in POLICIES.items():
        if cls.evicts or not evicting_only:
            first.setdefault(cls.behaviour(), name)
    return list(first.values())


BEHAVIOURS = one_policy_per_behaviour()  # inf-mllm, streaming-llm, h2o, full
EVICTING = one_policy_per_behaviour(evicting_only=True)  # inf-mllm, streaming-llm, h2o
