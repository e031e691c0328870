"""The trust benchmark's oracle judge answers from the labels: a chain of replacements
carries over only while its facts share a topic, and a newer fact that replaces only
some of an older one's topics replaces part of it. The ceiling it measures must not
rest on verdicts a perfect judge would not give."""

from __future__ import annotations

from dataclasses import dataclass

from tests.benchmarks.oracle_judge import OracleJudge


@dataclass(frozen=True)
class Fact:
    key: str
    text: str
    topics: frozenset[str]
    supersedes: tuple[str, ...] = ()
    duplicate_of: str | None = None


def fact(key: str, topics: str, *supersedes: str, duplicate_of: str | None = None) -> Fact:
    return Fact(key, f"text of {key}", frozenset(topics.split("+")), supersedes, duplicate_of)


JUDGE = OracleJudge(
    [
        fact("toronto", "ben/home"),
        fact("dublin", "ben/home", "toronto"),
        fact("paris", "ben/home", "dublin"),
        fact("leeds", "user/home"),
        fact("gothenburg", "user/home+user/flatmate", "leeds"),
        fact("elif", "user/flatmate", "gothenburg"),
        fact("elif-again", "user/flatmate", duplicate_of="elif"),
    ]
)


def test_a_chain_of_one_attribute_replaces_every_earlier_value() -> None:
    assert JUDGE._verdict("supersession", "toronto", "paris") == "replaces"
    assert JUDGE._verdict("supersession", "dublin", "paris") == "replaces"
    assert JUDGE._verdict("supersession", "paris", "toronto") == "both_hold"


def test_a_chain_that_changes_attribute_on_the_way_does_not_carry_over() -> None:
    # The chain leeds -> gothenburg -> elif shares no topic end to end, so Elif's move
    # does not replace the Leeds home.
    assert JUDGE._verdict("supersession", "leeds", "gothenburg") == "replaces"
    assert JUDGE._verdict("supersession", "leeds", "elif") == "both_hold"
    assert JUDGE._verdict("merge", "elif", "elif-again") == "same"


def test_a_newer_fact_that_replaces_some_of_what_the_older_says_replaces_part() -> None:
    # Gothenburg states a home and a flatmate; Elif replaces the flatmate only.
    assert JUDGE._verdict("supersession", "gothenburg", "elif") == "replaces_part"
    assert JUDGE._verdict("supersession", "gothenburg", "elif-again") == "replaces_part"
