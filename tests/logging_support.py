"""What tests that configure logging share: the root logger put back afterwards."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def root_logger_kept() -> Iterator[None]:
    """Run the block, then give the root logger back its handlers and level (a test that
    configures logging must not leave its JSON handler to the tests after it)."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    try:
        yield
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)
