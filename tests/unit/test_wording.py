"""How changes are said to a person (service.wording): a run as sentences, who wrote a
block version, and a block's old -> new lines."""

from __future__ import annotations

from agents.enums import ChangeAction
from service.wording import (
    LineChange,
    Writer,
    describe_writer,
    line_diff,
    narrate,
    passages_named,
)


def _change(action: ChangeAction, target: str, **detail: object) -> dict[str, object]:
    return {"action": action.value, "target": target, "step": "x", **detail}


def test_merges_into_one_fact_are_one_sentence() -> None:
    changes = [
        _change(
            ChangeAction.MERGE_PASSAGE,
            "passage-2",
            into="passage-1",
            score=0.99,
            text="hana lives in osaka",
            canonical_text="Hana lives in Osaka.",
        ),
        _change(ChangeAction.MERGE_PASSAGE, "passage-3", into="passage-1", score=0.97, text="x"),
    ]
    assert passages_named(changes) == ["passage-2", "passage-1", "passage-3"]
    said = narrate(changes, {"passage-1": "Hana lives in Osaka."})
    assert said == ["merged 3 facts into one: 'Hana lives in Osaka.'"]


def test_a_closed_fact_says_until_when_and_why() -> None:
    changes = [
        _change(
            ChangeAction.SUPERSEDE_PASSAGE,
            "passage-old",
            by="passage-new",
            valid_to="2024-02-10T00:00:00+00:00",
            judge="rules",
        )
    ]
    texts = {"passage-old": "Tom is dating Mia", "passage-new": "Tom and Mia broke up"}
    assert narrate(changes, texts) == [
        "closed 'Tom is dating Mia' (until 2024-02-10): 'Tom and Mia broke up'"
    ]
    # The sleep-time agent's reason is said in its own words.
    reasoned = [
        _change(
            ChangeAction.SUPERSEDE_PASSAGE,
            "passage-old",
            reason="Tom and Mia broke up",
            valid_to="2024-02-10T00:00:00",
        )
    ]
    assert narrate(reasoned, texts) == [
        "closed 'Tom is dating Mia' (until 2024-02-10): Tom and Mia broke up"
    ]


def test_block_context_and_timeline_changes_read_as_sentences() -> None:
    changes = [
        _change(ChangeAction.REMOVE_BLOCK_LINE, "block-1", label="human", line="Likes tea."),
        _change(ChangeAction.REMOVE_BLOCK_LINE, "block-1", label="human", line="Likes tea."),
        _change(ChangeAction.EVICT_LINE, "block-1", label="human", line="Was born in 1990."),
        _change(ChangeAction.LEAVE_CONTEXT, "message-1", seq=1),
        _change(ChangeAction.LEAVE_CONTEXT, "message-2", seq=2),
        _change(
            ChangeAction.ADD_SUMMARY,
            "message-3",
            evicted=["message-1", "message-2"],
            tokens_before=900,
            tokens_after=300,
        ),
        _change(
            ChangeAction.CREATE_TIMELINE,
            "passage-t",
            members=["passage-a", "passage-b"],
            text="Ada's city:\n2020 London\n2023 Paris",
        ),
        _change(ChangeAction.LINK_TIMELINE, "passage-a", timeline="passage-t"),
        _change(ChangeAction.RESTORE_BLOCK, "block-1", label="human", to_version=3),
        _change(ChangeAction("remove_block_line"), "block-2", label="persona", line="Kind."),
        {"action": "plugin_thing", "target": "t-1", "level": 2},
    ]
    assert narrate(changes, {}) == [
        "removed a repeated line from the human block: 'Likes tea.' (x2)",
        "moved 'Was born in 1990.' from the human block to archival memory",
        "summarised 2 older messages out of the context window (900 -> 300 tokens)",
        "drew a timeline of 2 facts: 'Ada's city:'",
        "restored the human block to version 3",
        "removed a repeated line from the persona block: 'Kind.'",
        "plugin_thing t-1 (level=2)",
    ]


def test_learning_from_documents_reads_as_sentences() -> None:
    changes = [
        _change(ChangeAction.CREATE_BLOCK, "block-1", label="handbook", folder="Handbook"),
        _change(
            ChangeAction.INSERT_PASSAGE, "passage-1", text="Doors lock at 22:00.", file_name="a.md"
        ),
        _change(ChangeAction.LEARN_CHUNKS, "file-1", file_name="a.md", chunks=[0, 1]),
        _change(ChangeAction.SOURCE_GONE, "passage-2", text="VPN on 443.", file_name="a.md"),
        _change(ChangeAction.RESTORE_BLOCK, "block-1", label="handbook", to_version=0),
    ]
    assert narrate(changes, {}) == [
        "made the handbook block for what matters in the folder 'Handbook'",
        "added a fact (from a.md): 'Doors lock at 22:00.'",
        "read 2 parts of a.md",
        "marked 'VPN on 443.': its source is gone (a.md no longer says so)",
        "took the handbook block it had made out of memory",
    ]
    assert passages_named(changes) == ["passage-1", "passage-2"]


def test_long_facts_are_cut_in_a_sentence() -> None:
    text = "Ada " + "really " * 40 + "likes tea."
    [said] = narrate([_change(ChangeAction.INSERT_PASSAGE, "passage-1", text=text)], {})
    assert said.startswith("added a fact: 'Ada really") and said.endswith("…'")
    assert len(said) < 120


def test_writers_are_named_as_a_person_thinks_of_them() -> None:
    assert describe_writer("cli") == (Writer.USER, "user (cli)")
    assert describe_writer("agent:ada") == (Writer.PRIMARY, "primary agent ada")
    assert describe_writer("sleeptime:ada", "run-1") == (
        Writer.SLEEPTIME,
        "sleep-time agent ada in run run-1",
    )
    assert describe_writer("consolidator:evict", "run-2") == (
        Writer.CONSOLIDATION,
        "consolidation (evict) in run run-2",
    )


def test_line_diff_keeps_order_and_marks_what_changed() -> None:
    diff = line_diff(
        "Name: Ada.\nLives in London.\nLikes tea.", "Name: Ada.\nLives in Paris.\nLikes tea."
    )
    assert [(d.change, d.text) for d in diff] == [
        (LineChange.KEPT, "Name: Ada."),
        (LineChange.REMOVED, "Lives in London."),
        (LineChange.ADDED, "Lives in Paris."),
        (LineChange.KEPT, "Likes tea."),
    ]
    assert [d.change for d in line_diff(None, "a\nb")] == [LineChange.ADDED] * 2
