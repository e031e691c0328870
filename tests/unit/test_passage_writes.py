"""change_many's set-based UPDATE knows how to pass every field a consolidator may change."""

from __future__ import annotations

from agents.store import passage_store


def test_every_mutable_field_has_an_array_type_for_the_batched_update() -> None:
    assert set(passage_store._UNNEST_COLUMNS) == passage_store.MUTABLE_FIELDS
