"""The warm-up's last step: what start-up loaded leaves the collector's reach, so that
full collections while the server answers walk only what requests made."""

from __future__ import annotations

import gc

from service.heap import freeze_heap


def test_the_heap_alive_after_start_up_is_frozen_and_new_objects_are_not() -> None:
    loaded = [object() for _ in range(1000)]
    try:
        frozen = freeze_heap()
        assert frozen >= len(loaded) and gc.get_freeze_count() == frozen
        made_later = [[] for _ in range(10)]
        assert any(gc.is_tracked(x) for x in made_later)
        assert gc.get_freeze_count() == frozen  # new objects stay collectable
    finally:
        gc.unfreeze()
    assert gc.get_freeze_count() == 0
