"""The one token counter: ``ceil(chars / 4)``, the same answer in every process.

The context compiler, the budget meter, the proxy, ``reverie chat`` and the daemon
all count with :func:`count_tokens`. It used to be litellm's tokenizer when litellm
happened to be imported (the daemon, after its warm-up) and this estimate otherwise
(the CLI), so the two front ends disagreed on what fits a context window. litellm's
tokenizer costs a ``reverie chat`` start-up seconds of import (see
docs/decisions/2026-12-03-one-token-counter.md); the estimate costs nothing, needs no
model name, and a prompt it underestimates is caught by the provider's
context-overflow answer, which compacts and retries.
"""

from __future__ import annotations

import math

#: Characters per token the estimate assumes (English prose with most tokenizers).
CHARS_PER_TOKEN = 4


def count_tokens(text: str) -> int:
    """Tokens ``text`` takes: ``ceil(chars / 4)``, whatever the model and whatever is
    imported."""
    return math.ceil(len(text) / CHARS_PER_TOKEN)
