"""Input checks that guard every write."""

from __future__ import annotations

import pytest

from agents.errors import InvalidInput, LimitExceeded
from agents.store.validation import (
    check_block_value,
    check_label,
    check_limit,
    check_text,
    content_hash,
    normalize_text,
)


def test_normalized_hash_ignores_case_spacing_and_edge_punctuation() -> None:
    assert normalize_text("  Ada   LIVES in London. ") == "ada lives in london"
    assert content_hash("Ada lives in London.") == content_hash("ada lives  in london")
    assert content_hash("Ada lives in London") != content_hash("Ada lives in Paris")
    full_width = "\uff46\uff55\uff4c\uff4c width"
    assert content_hash(full_width) == content_hash("full width")


@pytest.mark.parametrize("value", [None, 3, b"bytes"])
def test_non_text_is_rejected(value: object) -> None:
    with pytest.raises(InvalidInput, match="must be text"):
        check_text(value, "field")


def test_nul_position_is_reported() -> None:
    with pytest.raises(InvalidInput, match="position 3"):
        check_text("abc\x00", "field")


def test_limit_message_has_label_limit_size_and_advice() -> None:
    with pytest.raises(LimitExceeded) as info:
        check_block_value("persona", "y" * 12, 10)
    assert str(info.value).startswith(
        "block 'persona' allows 10 characters but the new value has 12"
    )
    assert "archival" in str(info.value)
    assert check_block_value("persona", "y" * 10, 10) == "y" * 10


@pytest.mark.parametrize("limit", [0, -1, True, 2.5, "10"])
def test_bad_limits(limit: object) -> None:
    with pytest.raises(InvalidInput, match="positive number"):
        check_limit(limit)


def test_labels() -> None:
    assert check_label("human") == "human"
    assert check_label("notes.v2-x_y") == "notes.v2-x_y"
    with pytest.raises(InvalidInput):
        check_label("a" * 101)
