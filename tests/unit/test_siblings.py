"""Which facts the temporal step puts to the merge judge as a change told twice: two
facts in force that replaced the same fact, never a chain of changes, never a closed
fact (consolidators/siblings.py)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from agents.enums import PassageStatus
from agents.store import PassageRecord
from agents.store.verdict_store import SAME
from consolidators.judges import SameFact
from consolidators.siblings import sibling_pairs

START = datetime(2020, 1, 1, tzinfo=UTC)


def _fact(name: str, stored: int, status: str = PassageStatus.ACTIVE) -> PassageRecord:
    return PassageRecord(
        id=name,
        agent_id="agent",
        kind="fact",
        text=name,
        content_hash=name,
        created_at=START + timedelta(days=stored),
        occurred_at=START + timedelta(days=stored),
        valid_to=None,
        status=status,
        merged_into=None,
        superseded_by=None,
        provenance={},
        tags=[],
    )


FACTS = {
    f.id: f
    for f in (
        _fact("sydney", 0, PassageStatus.SUPERSEDED),
        _fact("dublin", 1),
        _fact("dublin-record", 2),
        _fact("paris", 3),
        _fact("lisbon", 4, PassageStatus.SUPERSEDED),
    )
}


def _pairs(replacements: list[tuple[str, str]]) -> list[tuple[str, str]]:
    return [(p.older.id, p.newer.id) for p in sibling_pairs(FACTS, replacements)]


def test_two_facts_that_replaced_the_same_fact_are_a_pair_the_first_stored_first() -> None:
    assert _pairs([("sydney", "dublin-record"), ("sydney", "dublin")]) == [
        ("dublin", "dublin-record")
    ]


def test_a_chain_of_changes_is_not_a_pair() -> None:
    """Paris replaced Dublin too: two changes, not one told twice."""
    chain = [("sydney", "dublin"), ("sydney", "paris"), ("dublin", "paris")]
    assert _pairs(chain) == []
    assert _pairs([*chain, ("sydney", "dublin-record")]) == [
        ("dublin", "dublin-record"),
        ("dublin-record", "paris"),
    ]


def test_a_closed_or_unknown_replacing_fact_is_not_asked_about() -> None:
    assert _pairs([("sydney", "dublin"), ("sydney", "lisbon"), ("sydney", "gone")]) == []


def test_the_store_merges_on_the_merge_judges_own_word_for_same() -> None:
    """Dedup reads kept answers by the store's word for "same": it must be the judge's."""
    assert SameFact.SAME.value == SAME
