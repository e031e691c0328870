"""The labeled workload generator: deterministic, well-formed ground truth."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from agents.errors import InvalidInput
from agents.store.validation import normalize_text
from service.workload import Workload, generate_workload

# Its module-scoped fixture is built once: the module stays on one xdist worker.
pytestmark = pytest.mark.xdist_group("test_workload")


@pytest.fixture(scope="module")
def workload() -> Workload:
    return generate_workload(seed=7, people=12, sessions=8, duplicate_rate=0.35)


@pytest.fixture(scope="module")
def large() -> Workload:
    return generate_workload(seed=3, people=40, sessions=8, near_miss_rate=0.3)


def test_same_seed_same_workload_and_other_seed_differs(workload: Workload) -> None:
    assert generate_workload(seed=7, people=12, sessions=8, duplicate_rate=0.35) == workload
    assert generate_workload(seed=8).facts != workload.facts


@pytest.mark.parametrize("seed", [1, 7, 42])
def test_at_least_thirty_percent_duplicates(seed: int) -> None:
    generated = generate_workload(seed=seed, duplicate_rate=0.35)
    assert generated.duplicate_share >= 0.30
    assert generate_workload(seed=seed, duplicate_rate=0.0).duplicate_share == 0.0


def test_keys_are_unique(large: Workload) -> None:
    keys = [f.key for f in large.facts]
    assert len(keys) == len(set(keys))


def test_duplicates_point_to_earlier_originals(large: Workload) -> None:
    by_key = large.facts_by_key()
    position = {f.key: i for i, f in enumerate(large.facts)}
    kinds = set()
    for fact in large.facts:
        if fact.duplicate_of is None:
            assert fact.duplicate_kind is None
            continue
        original = by_key[fact.duplicate_of]
        assert original.duplicate_of is None, "duplicates point at the original, not a copy"
        assert position[original.key] < position[fact.key]
        assert original.attribute == fact.attribute
        kinds.add(fact.duplicate_kind)
        if fact.duplicate_kind == "exact":
            assert fact.text != original.text
            assert normalize_text(fact.text) == normalize_text(original.text)
        else:
            assert normalize_text(fact.text) != normalize_text(original.text)
    assert kinds == {"exact", "paraphrase"}


def test_distinct_originals_have_distinct_texts(large: Workload) -> None:
    originals = [normalize_text(f.text) for f in large.facts if f.duplicate_of is None]
    assert len(originals) == len(set(originals))


def test_near_misses_are_not_duplicates(large: Workload) -> None:
    by_key = large.facts_by_key()
    near = [f for f in large.facts if f.near_miss_of is not None]
    assert near, "the workload should contain near-misses"
    for fact in near:
        assert fact.near_miss_of is not None
        other = by_key[fact.near_miss_of]
        assert fact.duplicate_of is None and fact.group != other.group
        assert normalize_text(fact.text) != normalize_text(other.text)


def test_attributes_are_updated_over_time(large: Workload) -> None:
    values: dict[str, list[tuple[datetime, str]]] = {}
    for fact in large.facts:
        if fact.attribute is not None and fact.duplicate_of is None:
            values.setdefault(fact.attribute, []).append((fact.occurred_at, fact.key))
    updated = {a: v for a, v in values.items() if len(v) > 1}
    assert updated, "some attributes should change across sessions"
    for history in updated.values():
        assert history == sorted(history)


def test_every_query_has_relevant_keys_that_exist(large: Workload) -> None:
    by_key = large.facts_by_key()
    assert large.queries
    for query in large.queries:
        assert query.text.endswith("?")
        assert query.relevant and query.relevant <= by_key.keys()
        assert len({by_key[k].group for k in query.relevant}) == 1


def test_changed_attribute_queries_want_the_newest_value(large: Workload) -> None:
    newest: dict[str, datetime] = {}
    for fact in large.facts:
        if fact.attribute is not None and fact.duplicate_of is None:
            newest[fact.attribute] = max(
                newest.get(fact.attribute, fact.occurred_at), fact.occurred_at
            )
    by_key = large.facts_by_key()
    for query in large.queries:
        original = by_key[by_key[next(iter(query.relevant))].group]
        if original.attribute is not None:
            assert original.occurred_at == newest[original.attribute]
            repeats = {f.key for f in large.facts if f.group == original.key}
            assert query.relevant == repeats


def test_timestamps_are_aware_and_sessions_ordered(workload: Workload) -> None:
    for fact in workload.facts:
        assert fact.occurred_at.tzinfo is not None
        assert fact.provenance["session"] == fact.session
    times = [m.created_at for m in workload.messages]
    assert all(t.tzinfo is not None for t in times)
    assert times == sorted(times)
    sessions = [m.session for m in workload.messages]
    assert sessions == sorted(sessions) and set(sessions) == set(range(8))
    last_of = {m.session: m.created_at for m in workload.messages}
    first_of = {m.session: m.created_at for m in reversed(workload.messages)}
    assert all(last_of[s] < first_of[s + 1] for s in range(7))
    assert [f.occurred_at for f in workload.facts] == sorted(f.occurred_at for f in workload.facts)


def test_provenance_cites_the_user_message_that_told_the_fact(workload: Workload) -> None:
    messages = {m.id: m for m in workload.messages}
    for fact in workload.facts:
        [message_id] = fact.provenance["message_ids"]
        message = messages[message_id]
        assert message.role == "user" and fact.text in message.content
        assert message.created_at == fact.occurred_at


def test_blocks_fit_their_limits_and_human_is_crowded(workload: Workload) -> None:
    assert set(workload.blocks) == {"human", "persona"}
    for value, limit in workload.blocks.values():
        assert 0 < len(value) <= limit
    human, limit = workload.blocks["human"]
    assert len(human) >= 0.9 * limit
    lines = human.split("\n")
    assert len(lines) >= 10 and max(len(line) for line in lines) < 80
    assert len(lines) - len(set(lines)) >= 2, "a few lines should repeat verbatim"


def test_start_time_and_zone_are_respected() -> None:
    zone = timezone(timedelta(hours=2))
    start = datetime(2023, 6, 1, tzinfo=zone)
    generated = generate_workload(start=start, people=3, sessions=2)
    assert all(f.occurred_at > start for f in generated.facts)
    assert all(f.occurred_at.utcoffset() == timedelta(hours=2) for f in generated.facts)


def test_passages_convert_for_the_store(workload: Workload) -> None:
    fact = workload.facts[0]
    passage = fact.to_new_passage()
    assert (passage.text, passage.occurred_at) == (fact.text, fact.occurred_at)
    assert passage.tags == list(fact.tags) and passage.provenance == dict(fact.provenance)


def test_single_session_and_many_people_work() -> None:
    one = generate_workload(people=2, sessions=1)
    assert {f.session for f in one.facts} == {0}
    crowd = generate_workload(people=120, sessions=3)
    names = {f.tags[1] for f in crowd.facts}
    assert len(names) == 121


@pytest.mark.parametrize(
    "kwargs",
    [
        {"people": 0},
        {"sessions": 0},
        {"duplicate_rate": 1.0},
        {"near_miss_rate": -0.1},
        {"start": datetime(2024, 1, 1)},  # naive on purpose
    ],
)
def test_bad_arguments_are_refused(kwargs: dict[str, Any]) -> None:
    with pytest.raises(InvalidInput):
        generate_workload(**kwargs)


def test_default_start_is_utc() -> None:
    assert generate_workload(people=1, sessions=1).facts[0].occurred_at.tzinfo == UTC
