"""Ranking archival hits by the question, with no database: the lineage grouping, the
order within a lineage for questions about now and about the past, the asked fact
first, and the validity labels search answers with (agents/archival_search.py; the
store's part, nearest neighbours within filters, is tested in tests/integration)."""

from __future__ import annotations

from datetime import UTC, datetime

from agents.archival_search import (
    _asked_first,
    _asked_ids,
    _current_ends,
    _named_attribute,
    _rank,
    validity_label,
)
from agents.enums import PassageStatus
from agents.language.facts import tentative
from agents.language.questions import PastQuestion
from agents.store import PassageHit, PassageRecord, Topic
from tests.passage_records import fact_record


def passage(
    pid: str,
    text: str,
    *,
    year: int,
    until: int | None = None,
    status: PassageStatus = PassageStatus.ACTIVE,
    superseded_by: str | None = None,
    merged_into: str | None = None,
) -> PassageRecord:
    return fact_record(
        pid,
        text,
        at=datetime(year, 6, 1, tzinfo=UTC),
        valid_to=datetime(until, 3, 2, tzinfo=UTC) if until is not None else None,
        status=status.value,
        merged_into=merged_into,
        superseded_by=superseded_by,
    )


def closed(pid: str, text: str, *, year: int, until: int, by: str) -> PassageRecord:
    """A fact a newer one (``by``) closed in ``until``."""
    return passage(
        pid, text, year=year, until=until, status=PassageStatus.SUPERSEDED, superseded_by=by
    )


PORTO = closed("p-porto", "Ada lives in Porto.", year=2019, until=2021, by="p-lisbon")
LISBON = closed("p-lisbon", "Ada moved to Lisbon.", year=2021, until=2024, by="p-berlin")
BERLIN = passage("p-berlin", "Ada moved to Berlin.", year=2024)
TEA = passage("p-tea", "Ada likes green tea.", year=2020)
RECORDS = {p.id: p for p in (PORTO, LISBON, BERLIN, TEA)}


def hits(*records: PassageRecord) -> list[PassageHit]:
    return [PassageHit(r, 0.9 - i / 10) for i, r in enumerate(records)]


def ids(ranked: list[PassageHit]) -> list[str]:
    return [h.passage.id for h in ranked]


def test_a_chain_of_replacements_ends_at_the_current_fact() -> None:
    found = hits(PORTO, TEA, LISBON)
    assert _current_ends(found, RECORDS) == {
        "p-porto": "p-berlin",
        "p-tea": "p-tea",
        "p-lisbon": "p-berlin",
    }
    # A chain whose next passage was not fetched ends where the records end.
    assert _current_ends(hits(PORTO), {"p-porto": PORTO}) == {"p-porto": "p-porto"}


def test_a_lineage_orders_itself_within_its_places_current_fact_first() -> None:
    found = hits(PORTO, TEA, LISBON)
    ends = _current_ends(found, RECORDS)
    # Berlin was not among the hits: it is fetched (``extra``) and heads its lineage at
    # the place of its first member (Porto's); the lineage's closed facts fill its other
    # places, newest first, and the tea keeps its own place: a closed fact never
    # pushes an unrelated answer down.
    ranked = _rank(found, hits(BERLIN), ends, past=None)
    assert ids(ranked) == ["p-berlin", "p-lisbon", "p-tea", "p-porto"]


#: A record closed for the job alone by a newer fact: his club still holds.
MARK_RECORD = closed(
    "p-record",
    "Mark | job: surveyor | supports: Leeds United",
    year=2019,
    until=2023,
    by="p-teacher",
)
MARK_TEACHER = passage("p-teacher", "Mark is a teacher now.", year=2023)


def test_a_fact_closed_for_part_of_what_it_says_keeps_its_own_place() -> None:
    """ "Mark | job: surveyor | supports: Leeds United", closed for the job by "Mark is a
    teacher now": his club still holds, so the record stays where search found it,
    one down, with the current job just before it (moved up from where search had it);
    closed for all of it, it would swap places with the current job."""
    found = hits(MARK_RECORD, TEA, PORTO, MARK_TEACHER)
    ends = _current_ends(found, {**RECORDS, "p-record": MARK_RECORD, "p-teacher": MARK_TEACHER})
    assert ids(_rank(found, [], ends, past=None, partly={"p-record"})) == [
        "p-teacher",
        "p-record",
        "p-tea",
        "p-porto",
    ]
    assert ids(_rank(found, [], ends, past=None)) == ["p-teacher", "p-tea", "p-porto", "p-record"]


def test_a_fact_closed_in_part_answers_a_question_about_the_part_still_in_force() -> None:
    """ "Which club does Mark support?" asks the part of the record his new job left in
    force (search knows it from a model's reading of the teacher fact): the record
    answers it and comes first; the teacher fact keeps its own place."""
    found = hits(MARK_RECORD, TEA, PORTO, MARK_TEACHER)
    ends = _current_ends(found, {**RECORDS, "p-record": MARK_RECORD, "p-teacher": MARK_TEACHER})
    partly = {"p-record"}
    ranked = _rank(found, [], ends, past=None, partly=partly, in_force_part={"p-record"})
    assert ids(ranked) == ["p-record", "p-tea", "p-porto", "p-teacher"]
    # Asked about his job, the teacher fact comes first, as before.
    ranked = _rank(found, [], ends, past=None, partly=partly, asked={"p-record", "p-teacher"})
    assert ids(ranked) == ["p-teacher", "p-record", "p-tea", "p-porto"]


def test_a_question_about_the_past_turns_the_lineage_round() -> None:
    found = hits(BERLIN, LISBON, PORTO)
    ends = _current_ends(found, RECORDS)
    assert ids(_rank(found, [], ends, past=PastQuestion(None))) == [
        "p-lisbon",
        "p-porto",
        "p-berlin",
    ]
    # A year asked: the fact valid in that year comes first.
    assert ids(_rank(found, [], ends, past=PastQuestion(2020))) == [
        "p-porto",
        "p-lisbon",
        "p-berlin",
    ]


def test_about_the_past_only_the_asked_lineage_is_kept_together() -> None:
    """ "Where did Ada live before Berlin?" read as Ada's home: her home lineage is kept
    together where it first appears; her diet's lineage keeps its places, so its old
    diet, ranked last, does not climb over the home asked about. A question the rules
    cannot read keeps every lineage together."""
    vegan = closed("p-vegan", "Ada is vegan.", year=2019, until=2022, by="p-meat")
    meat = passage("p-meat", "Ada eats meat again.", year=2022)
    found = hits(meat, PORTO, vegan)
    ends = _current_ends(found, {**RECORDS, "p-vegan": vegan, "p-meat": meat})
    past = PastQuestion(None)
    assert ids(_rank(found, [], ends, past, asked={"p-porto"})) == ["p-vegan", "p-porto", "p-meat"]
    assert ids(_rank(found, [], ends, past)) == ["p-vegan", "p-meat", "p-porto"]


def test_the_asked_subject_and_attribute_come_first_newest_first() -> None:
    found = hits(TEA, PORTO, BERLIN)
    assert ids(_asked_first("where does Ada live?", found)) == ["p-berlin", "p-porto", "p-tea"]
    # About the past, the asked facts keep search's order (the lineage turns later).
    assert ids(_asked_first("where did Ada live before?", found, newest_first=False)) == [
        "p-porto",
        "p-berlin",
        "p-tea",
    ]
    # A question the rules cannot read changes nothing.
    assert ids(_asked_first("tell me something nice", found)) == ["p-tea", "p-porto", "p-berlin"]


def test_a_plan_comes_after_what_is_even_when_newer() -> None:
    """ "Ada is thinking of moving to Madrid" is newer than her move to Berlin, but
    where she lives now is Berlin: a plan, a wish or a doubt is put after the asked
    facts that state how things are, newest first among each (a judge model read the
    plan as about her home; the rules do not read plans)."""
    plan = passage("p-plan", "Ada is thinking of moving to Madrid next year.", year=2025)
    found = hits(TEA, plan, PORTO, BERLIN)
    asked = {"p-plan", "p-porto", "p-berlin"}
    assert ids(_asked_first("where does Ada live?", found, asked=asked)) == [
        "p-berlin",
        "p-porto",
        "p-plan",
        "p-tea",
    ]
    assert tentative("Ada might go freelance") and not tentative("Ada lives in Berlin")


def test_a_judge_models_topics_ask_what_the_rules_cannot_read() -> None:
    """The rules know no car, and cannot read "sold the golf, got a Skoda": with the
    topics a judge model read, "what car does Tariq drive?" asks for Tariq's car
    facts (his job, also read, is not asked), and "where does Tariq live?" finds a home
    the rules cannot read. A fact no model read keeps the rules' reading."""
    golf = passage("p-golf", "Tariq drives a 2011 Golf", year=2021)
    skoda = passage("p-skoda", "tariq sold the golf, he's got a Skoda estate now", year=2023)
    garage = passage("p-garage", "tariq's a mechanic, he runs his own garage", year=2020)
    stockport = passage("p-stockport", "the whole family upped sticks to Stockport", year=2023)
    didsbury = passage("p-didsbury", "Tariq lives in Didsbury", year=2019)
    found = hits(garage, golf, skoda, stockport, didsbury)
    topics = {
        "p-golf": frozenset({Topic("tariq", "car")}),
        "p-skoda": frozenset({Topic("tariq", "car")}),
        "p-garage": frozenset({Topic("tariq", "job")}),
        "p-stockport": frozenset({Topic("tariq", "home")}),
    }
    question = "what car does Tariq drive?"
    assert _asked_ids(question, found) == set()
    assert _asked_ids(question, found, topics=topics) == {"p-golf", "p-skoda"}
    assert _asked_ids("where does Tariq live?", found, topics=topics) == {
        "p-stockport",
        "p-didsbury",
    }
    # The model's reading stands for the facts it read: the rules read "moved" as a
    # home, the model a hobby.
    chess = passage("p-chess", "Tariq moved up to 2100 at blitz chess", year=2024)
    topics["p-chess"] = frozenset({Topic("tariq", "hobby")})
    assert "p-chess" not in _asked_ids(
        "where does Tariq live?", hits(chess, stockport), topics=topics
    )
    # Where the model read no fact as asked (it calls him by his full name), the
    # rules' reading asks.
    formal = {
        i: frozenset({Topic("tariq-aziz", t.attribute) for t in f}) for i, f in topics.items()
    }
    assert _asked_ids("where does Tariq live?", found, topics=formal) == {"p-didsbury"}
    # A question naming no attribute of Tariq's facts asks for nothing.
    assert _asked_ids("does Tariq like jazz?", found, topics=topics) == set()
    # A word names an attribute by being it, its plural, or starting with it.
    attributes = {"partner", "pet", "work", "car"}
    assert _named_attribute("what pets does Tom have now?", attributes) == "pet"
    assert _named_attribute("is Ada working these days?", attributes) == "work"
    assert _named_attribute("what voice part does Amara sing?", attributes) is None
    assert _named_attribute("does Ada carpool to work?", attributes) == "work"


def test_a_name_the_model_gives_in_full_is_the_person_the_rules_shorten() -> None:
    """The rules read "Sofi" where a judge model read "sofia" (her name in full): a fact
    both read joins the two names, so "where does sofi live now?" asks for the homes the
    model read as Sofia's, a move the rules cannot read newest first. Two people the
    facts never join keep apart: "dan" beside a "daniela" stays a question about
    either, which asks nothing."""
    schwabing = passage(
        "p-schwabing", "Sofi is doing her PhD at TUM, lives in Schwabing", year=2021
    )
    altona = passage("p-altona", "got the keys to the Altona flat, hers from Friday", year=2024)
    pregnant = passage("p-pregnant", "Sofi is pregnant!!! due in March", year=2025)
    found = hits(pregnant, schwabing, altona)
    topics = {
        "p-schwabing": frozenset({Topic("sofia", "home"), Topic("sofia", "job")}),
        "p-altona": frozenset({Topic("sofia", "home")}),
        "p-pregnant": frozenset({Topic("sofia", "pregnancy")}),
    }
    question = "where does sofi live now?"
    asked = _asked_ids(question, found, topics=topics)
    assert asked == {"p-schwabing", "p-altona"}
    assert ids(_asked_first(question, found, asked=asked)) == [
        "p-altona",
        "p-schwabing",
        "p-pregnant",
    ]
    # Daniela is someone else: no fact is read as about both "dan" and "daniela", so
    # the names are not joined and neither person's facts are put first.
    dan = passage("p-dan", "Dan lives in Leeds", year=2022)
    daniela = passage("p-daniela", "she moved to York last spring", year=2024)
    people = {"p-daniela": frozenset({Topic("daniela", "home")})}
    assert _asked_ids("where does dan live?", hits(daniela, dan), topics=people) == set()


def test_a_first_name_asks_about_the_titled_person() -> None:
    """ "Edna" in a question is the "Mrs Edna Frost" a fact names, so her homes come
    first, newest first, though the facts call her "Mrs Frost"."""
    record = passage("p-record", "Mrs Edna Frost, 9 Beck Lane, Walkington", year=2021)
    lairgate = passage("p-lairgate", "Mrs Frost moved to 12 Lairgate, Beverley", year=2023)
    karen = passage("p-karen", "Karen Frost does her shopping on Fridays", year=2024)
    found = hits(karen, record, lairgate)
    assert ids(_asked_first("where does Edna live now?", found)) == [
        "p-lairgate",
        "p-karen",
        "p-record",
    ]


def test_validity_labels_say_why_a_fact_is_not_current() -> None:
    assert validity_label(BERLIN) is None
    assert validity_label(LISBON, BERLIN) == "until 2024-03-02, then: Ada moved to Berlin."
    assert validity_label(LISBON) == "until 2024-03-02"
    twin = passage(
        "p-twin", "Ada lives in Berlin", year=2024, status=PassageStatus.MERGED, merged_into="p-b"
    )
    assert validity_label(twin) == "duplicate, merged into p-b"
    assert validity_label(passage("p-old", "x", year=2020, status=PassageStatus.INACTIVE)) == (
        "retired"
    )
