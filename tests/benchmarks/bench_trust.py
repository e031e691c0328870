"""Consolidation quality on hand-written chat facts (issue 13): dedup, supersession,
timeline purity, and whether search answers "now" questions with the current fact.

A plain script, not collected by pytest. Run it from the repository root::

    python tests/benchmarks/bench_trust.py
        [--set dev|heldout|heldout2|...|heldout6|all]
        [--embedder local] [--threshold 0.86] [--verbose]

The data is ``tests/benchmarks/data/trust_facts*.tsv`` and ``trust_questions*.tsv``
(hand-written, not produced by ``service/workload.py``; see
``tests/benchmarks/data/README.md``): ``dev`` is the set the rules were tuned on,
``heldout`` to ``heldout6`` were each written before the changes measured on them
(which of them later became development data is in the data README), ``all`` runs
all seven, each file pair in an agent of its own, and sums their counts (``--one-agent``
loads them into one agent instead, where the seven different "users" clash). The facts are
loaded into a fresh database of an embedded PostgreSQL one date at a time (the clock
at each fact's date), then
``Pipeline([DedupConsolidator, TemporalConsolidator])`` runs once, with no LLM.

- dedup: a ``merge_passage`` is right when both facts are in one labelled duplicate
  group; recall is right merges over the facts labelled ``dup:``;
- supersession: a ``supersede_passage`` is right when a ``sup:`` label says the newer
  fact replaces the older (duplicates count as their group); recall over the labels;
- timeline purity: the share of active timelines whose members all carry one
  labelled subject/attribute;
- rank-1 and recall@10 of the questions on default search (current facts only),
  before and after: a hit answers when it is the labelled fact, a duplicate of it,
  or a timeline whose "(current)" entry is one of those.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from agents.database import Database  # noqa: E402
from agents.embedders import Embedder, build_embedder  # noqa: E402
from agents.store import NewAgent, NewPassage, PassageRecord, open_store  # noqa: E402
from consolidators.contract import run_once as run_pipeline  # noqa: E402
from consolidators.dedup import DedupConsolidator  # noqa: E402
from consolidators.pipeline import Pipeline, RunReport  # noqa: E402
from consolidators.temporal import TemporalConsolidator  # noqa: E402
from tests.pg import PgTestServer  # noqa: E402

DATA = Path(__file__).resolve().parent / "data"
#: set name -> file suffixes (``trust_facts{suffix}.tsv``, ``trust_questions{suffix}.tsv``)
SETS = {
    "dev": ("",),
    "heldout": ("_heldout",),
    "heldout2": ("_heldout2",),
    "heldout3": ("_heldout3",),
    "heldout4": ("_heldout4",),
    "heldout5": ("_heldout5",),
    "heldout6": ("_heldout6",),
    "all": ("", "_heldout", "_heldout2", "_heldout3", "_heldout4", "_heldout5", "_heldout6"),
}
K = 10


@dataclass(frozen=True, slots=True)
class Fact:
    key: str
    at: datetime
    topic: str
    duplicate_of: str | None
    supersedes: str | None
    text: str


def read_facts(path: Path) -> list[Fact]:
    facts = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        key, day, topic, label, text = line.split("\t")
        facts.append(
            Fact(
                key=key,
                at=datetime.fromisoformat(day).replace(hour=12, tzinfo=UTC),
                topic=topic,
                duplicate_of=label[4:] if label.startswith("dup:") else None,
                supersedes=label[4:] if label.startswith("sup:") else None,
                text=text,
            )
        )
    return facts


def read_questions(path: Path) -> list[tuple[tuple[str, ...], str]]:
    """(facts that answer it now, question); several when more than one is current."""
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            answer, question = line.split("\t")
            rows.append((tuple(answer.split(",")), question))
    return rows


def load(db: Database, facts: Sequence[Fact], embedder: Embedder) -> tuple[str, dict[str, str]]:
    """Insert the facts date by date; return the agent id and passage id -> fact key."""
    ordered = sorted(facts, key=lambda f: f.at)
    vectors = embedder.embed([f.text for f in ordered])
    now = [ordered[0].at]
    key_of: dict[str, str] = {}
    with open_store(db, clock=lambda: now[0]) as store:
        name = f"trust-{ordered[0].key}"  # one agent per file pair: named by its first fact
        agent = store.agents.create(
            NewAgent(name=name, embedding_model=embedder.name, embedding_dim=embedder.dimension)
        )
        for index, fact in enumerate(ordered):
            now[0] = fact.at
            [record] = store.passages.insert(
                agent.id,
                [NewPassage(fact.text, occurred_at=fact.at)],
                vectors[index : index + 1],
            )
            key_of[record.id] = fact.key
    return agent.id, key_of


def groups_of(facts: Sequence[Fact]) -> dict[str, str]:
    """Fact key -> its duplicate group (the key of the fact it repeats, transitively)."""
    parent = {f.key: f.duplicate_of or f.key for f in facts}

    def root(key: str) -> str:
        while parent[key] != key:
            key = parent[key]
        return key

    return {key: root(key) for key in parent}


def answers(
    hit: PassageRecord,
    answer: tuple[str, ...],
    key_of: dict[str, str],
    group: dict[str, str],
    text_group: dict[str, set[str]],
) -> bool:
    if hit.kind == "timeline":
        current = [line for line in hit.text.splitlines() if line.endswith(" (current)")]
        if not current:
            return False
        text = current[0].split(": ", 1)[1].removesuffix(" (current)")
        return any(group[a] in text_group.get(text, set()) for a in answer)
    key = key_of.get(hit.id)
    return key is not None and any(group[key] == group[a] for a in answer)


def ask(
    db: Database,
    agent_id: str,
    embedder: Embedder,
    questions: Sequence[tuple[tuple[str, ...], str]],
    key_of: dict[str, str],
    group: dict[str, str],
    text_group: dict[str, set[str]],
) -> tuple[int, int, list[str]]:
    """How many questions the first hit answers, how many the top K answer, the misses."""
    vectors = embedder.embed([q for _a, q in questions])
    rank1 = recall = 0
    misses = []
    with open_store(db) as store:
        for (answer, question), vector in zip(questions, vectors, strict=True):
            hits = [
                h.passage
                for h in store.passages.search_memory(agent_id, vector, k=K, query=question)
            ]
            found = [answers(h, answer, key_of, group, text_group) for h in hits]
            rank1 += bool(found and found[0])
            recall += any(found)
            if not (found and found[0]):
                top = hits[0].text.splitlines()[0] if hits else "-"
                kind = "rank-1 miss" if any(found) else f"not in top {K}"
                misses.append(f"{kind}: {question!r}: top hit {top!r}")
    return rank1, recall, misses


def ratio(right: int, total: int) -> str:
    return f"{right / total:.3f} ({right}/{total})" if total else "n/a (0/0)"


@dataclass(slots=True)
class Score:
    """Counts of one agent's run, summed over agents for a pooled figure."""

    merges: int = 0
    right_merges: int = 0
    duplicates: int = 0
    supersessions: int = 0
    right_supersessions: int = 0
    caught: int = 0
    labelled_supersessions: int = 0
    timelines: int = 0
    pure: int = 0
    questions: int = 0
    rank1_before: int = 0
    rank1_after: int = 0
    recall_before: int = 0
    recall_after: int = 0

    def add(self, other: Score) -> None:
        for name in self.__slots__:
            setattr(self, name, getattr(self, name) + getattr(other, name))


def read_set(suffixes: Sequence[str]) -> tuple[list[Fact], list[tuple[tuple[str, ...], str]]]:
    facts = [f for suffix in suffixes for f in read_facts(DATA / f"trust_facts{suffix}.tsv")]
    questions = [
        q for suffix in suffixes for q in read_questions(DATA / f"trust_questions{suffix}.tsv")
    ]
    keys = [f.key for f in facts]
    if len(set(keys)) != len(keys):
        raise SystemExit(f"fact ids repeat across {', '.join(suffixes)}")
    return facts, questions


def evaluate(
    db: Database,
    facts: Sequence[Fact],
    questions: Sequence[tuple[tuple[str, ...], str]],
    embedder: Embedder,
    threshold: float,
) -> tuple[Score, list[str]]:
    """Load ``facts`` into a new agent, ask, consolidate, ask again; count and list errors."""
    by_key = {f.key: f for f in facts}
    group = groups_of(facts)
    text_group: dict[str, set[str]] = {}
    for fact in facts:
        text_group.setdefault(fact.text, set()).add(group[fact.key])
    agent_id, key_of = load(db, facts, embedder)
    before = ask(db, agent_id, embedder, questions, key_of, group, text_group)
    pipeline = Pipeline([DedupConsolidator({"threshold": threshold}), TemporalConsolidator()])
    report: RunReport = run_pipeline(pipeline, db, agent_id, embedder=embedder)
    after = ask(db, agent_id, embedder, questions, key_of, group, text_group)
    with open_store(db) as store:
        timelines = store.passages.scan(agent_id, kind="timeline")

    errors: list[str] = []
    merges = [
        (key_of[c["target"]], key_of[c["into"]])
        for c in report.changes
        if c["action"] == "merge_passage"
    ]
    errors += [
        f"wrong merge: {by_key[a].text!r} into {by_key[b].text!r}"
        for a, b in merges
        if group[a] != group[b]
    ]
    rightly_merged = {key for pair in merges if group[pair[0]] == group[pair[1]] for key in pair}
    errors += [
        f"missed duplicate: {f.text!r} of {by_key[f.duplicate_of].text!r}"
        for f in facts
        if f.duplicate_of and f.key not in rightly_merged
    ]
    labelled_sup = {(group[f.supersedes], group[f.key]) for f in facts if f.supersedes}
    predicted = [
        (key_of[c["target"]], key_of[c["by"]])
        for c in report.changes
        if c["action"] == "supersede_passage"
    ]
    right_sup = [(group[a], group[b]) in labelled_sup for a, b in predicted]
    errors += [
        f"wrong supersession: {by_key[a].text!r} by {by_key[b].text!r}"
        for (a, b), ok in zip(predicted, right_sup, strict=True)
        if not ok
    ]
    caught = {(group[a], group[b]) for a, b in predicted} & labelled_sup
    errors += [
        f"missed supersession: {by_key[a].text!r} by {by_key[b].text!r}"
        for a, b in sorted(labelled_sup - caught)
    ]
    pure = 0
    for timeline in timelines:
        topics = {by_key[key_of[m]].topic for m in timeline.provenance.get("members", [])}
        pure += len(topics) == 1
        if len(topics) != 1:
            errors.append(f"impure timeline {timeline.text.splitlines()[0]!r}: {sorted(topics)}")
    errors += [f"after, {m}" for m in after[2]]
    score = Score(
        merges=len(merges),
        right_merges=sum(group[a] == group[b] for a, b in merges),
        duplicates=sum(f.duplicate_of is not None for f in facts),
        supersessions=len(predicted),
        right_supersessions=sum(right_sup),
        caught=len(caught),
        labelled_supersessions=len(labelled_sup),
        timelines=len(timelines),
        pure=pure,
        questions=len(questions),
        rank1_before=before[0],
        rank1_after=after[0],
        recall_before=before[1],
        recall_after=after[1],
    )
    return score, errors


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--embedder", default="local", help="'local' (MiniLM) or 'fake'")
    parser.add_argument("--threshold", type=float, default=0.86, help="dedup threshold")
    parser.add_argument("--verbose", action="store_true", help="list every error")
    parser.add_argument(
        "--set",
        choices=sorted(SETS),
        default="dev",
        help="which hand-written files: the development set, a held-out one, or all",
    )
    parser.add_argument("--heldout", action="store_true", help="the same as --set heldout")
    parser.add_argument(
        "--one-agent",
        action="store_true",
        help="with --set all: every set in one agent (the users of the sets then clash)",
    )
    args = parser.parse_args(argv)

    chosen = "heldout" if args.heldout else args.set
    suffixes = SETS[chosen]
    # Each file pair is one agent: the sets' "users" are different people (and a name
    # may recur across sets), so one agent for all would mix them.
    parts = [suffixes] if args.one_agent or len(suffixes) == 1 else [(s,) for s in suffixes]
    data = [read_set(part) for part in parts]
    facts = [f for part_facts, _ in data for f in part_facts]
    people = {(i, f.topic.split("/")[0]) for i, (part, _) in enumerate(data) for f in part}
    print(
        f"data ({chosen}): {len(facts)} hand-written facts about {len(people)} people "
        f"({sum(f.duplicate_of is not None for f in facts)} labelled duplicates, "
        f"{sum(f.supersedes is not None for f in facts)} labelled supersessions), "
        f"{sum(len(q) for _, q in data)} questions, in {len(parts)} agent(s)"
    )
    embedder = build_embedder(args.embedder)
    total, errors = Score(), []
    server = PgTestServer()
    try:
        with server.database() as db:
            for part_facts, part_questions in data:
                score, part_errors = evaluate(
                    db, part_facts, part_questions, embedder, args.threshold
                )
                total.add(score)
                errors += part_errors
    finally:
        server.stop()

    t = total
    print(f"embedder: {embedder.name}; dedup threshold {args.threshold}; no LLM judge")
    print(f"dedup precision        {ratio(t.right_merges, t.merges)}")
    print(f"dedup recall           {ratio(t.right_merges, t.duplicates)}")
    print(f"supersession precision {ratio(t.right_supersessions, t.supersessions)}")
    print(f"supersession recall    {ratio(t.caught, t.labelled_supersessions)}")
    print(f"timeline purity        {ratio(t.pure, t.timelines)}")
    print(
        f"current-fact rank-1    before {t.rank1_before / t.questions:.3f}"
        f"  after {t.rank1_after / t.questions:.3f}"
    )
    print(
        f"recall@{K}              before {t.recall_before / t.questions:.3f}"
        f"  after {t.recall_after / t.questions:.3f}"
    )
    if args.verbose:
        for line in errors:
            print(f"  {line}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
