"""A small byte-level BPE tokenizer trained in-process, for the tiny random-weight models.

Byte-level means every string can be encoded (no unknown tokens); the merges come from a short built-in text,
so ordinary words take a few tokens each. Training is deterministic: same corpus, same vocabulary.
"""

from __future__ import annotations

import logging

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast

logger = logging.getLogger(__name__)

_CORPUS = """\
You are a helpful assistant. What is happening in the video? Describe the scene.
A person walks into the room and sits on a chair. The cat is on the mat. A red car drives by.
What color is the car? How many people are there? What did the person do at the start of the stream?
The camera shows a kitchen, a street, a desk with a laptop, a dog in the park, and a door that opens.
Frame from 00:12: the stream continues. Answer the question about the video.
<t=0.0-4.0s> <t=4.0-8.0s> <t=12.0-16.0s> <t=120.5-124.5s> 0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16
"""


def build_bpe_tokenizer(
    special_tokens: list[str],
    *,
    vocab_size: int,
    bos_token: str | None,
    eos_token: str,
    pad_token: str,
    chat_template: str,
    extra_attributes: dict[str, str] | None = None,
    corpus: str = _CORPUS,
) -> PreTrainedTokenizerFast:
    """Train a byte-level BPE on `corpus` (a small built-in text by default); return it as a transformers fast
    tokenizer.

    special_tokens get the first ids (0, 1, ...) in the given order and are never split.
    extra_attributes become named special tokens of the tokenizer (e.g. image_token="<image>"), which
    transformers saves and reloads with it.
    """
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=special_tokens,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(corpus.splitlines(), trainer)
    kwargs: dict = {"eos_token": eos_token, "pad_token": pad_token}
    if bos_token is not None:
        kwargs["bos_token"] = bos_token
    if extra_attributes:
        kwargs["extra_special_tokens"] = dict(extra_attributes)
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=tok, chat_template=chat_template, **kwargs)
    logger.debug("built a byte-level BPE tokenizer with %d tokens", len(tokenizer))
    return tokenizer
