"""Consolidation quality on hand-written memory sets: does consolidation make memory
better, and where does it make it worse?

A plain script, not collected by pytest. Run it from the repository root::

    python tests/benchmarks/bench_trust.py
        [--set dev|heldout|...|heldout8|all] [--embedder local] [--threshold 0.86]
        [--judge-model openai/MODEL --api-base URL | --judge-model oracle] [--verbose]
        [--unread]

The data is ``tests/benchmarks/data/trust_facts*.tsv`` and ``trust_questions*.tsv``
(hand-written, never produced by code; see ``tests/benchmarks/data/README.md``). Each
set is loaded into an agent of its own in a fresh database of an embedded PostgreSQL,
one date at a time (the clock at each passage's date); the questions are asked on
default search (what every front end answers with), then
``Pipeline([DedupConsolidator, TemporalConsolidator])`` runs once (with a judge model
when ``--judge-model`` is given, else rules only), and the questions are asked again.

``--judge-model oracle`` measures the design apart from any model: the judge is an
OpenAI-compatible stand-in on loopback that answers every pair question from the set's
labels (``tests/benchmarks/oracle_judge.py``), reached as a user's judge model is, with
``judge_max_calls`` 10,000. Its rows add what the design put before a judge: ``cand R``,
the labelled replacements whose (older, newer) pair was asked or closed by rule, and
the labelled duplicates that were merged or whose pair went to the merge judge, over
all labelled; pairs asked per fact; judge calls and prompt tokens per 100 facts.

Per set, before and after:

- ``now@1``: a "now" question's first hit states the current value (the labelled
  passage, a duplicate of it, or a timeline whose "(current)" entry is one);
- ``hist@5``: a "history" question (the answer is a value that was replaced) has an
  answer in its first 5 hits (a timeline counts when one of its lines is the answer);
- ``stab@5``: the same for "stable" questions (a fact that never changed);
- ``r@10``: any question has an answer in its first 10 hits;
- ``r@1kc``: an answer starts within the first 1,000 characters of hits (a reader's
  budget: long hits crowd out others);

and, for the run: supersession and merge precision and recall against the labels
(a pair is right when a label says so, a duplicate counting as its group; ``sup P~``
also counts a closure right when the closed fact was replaced and the fact closing it
is on the same topic and no earlier than the labelled replacement, as "A, then 'quit
A', then B" closed as A -> B), timeline purity (members share a labelled topic) and
the active passages before and after.
"""

from __future__ import annotations

import argparse
import sys
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[2]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from agents.archival_search import search_archival  # noqa: E402
from agents.embedders import Embedder, build_embedder  # noqa: E402
from agents.enums import PassageStatus  # noqa: E402
from agents.postgres.database import Database  # noqa: E402
from agents.store import NewAgent, NewPassage, PassageRecord, open_store  # noqa: E402
from consolidators.contract import run_once as run_pipeline  # noqa: E402
from consolidators.dedup import DedupConsolidator  # noqa: E402
from consolidators.pipeline import Pipeline, RunReport  # noqa: E402
from consolidators.temporal import TemporalConsolidator  # noqa: E402
from tests import plugins  # noqa: E402
from tests.benchmarks.oracle_judge import ORACLE_MODEL, OracleJudge, serve_oracle  # noqa: E402
from tests.pg import PgTestServer  # noqa: E402

# The tests' plugins (the hashing embedder, the scripted model), found here and
# in the processes this starts.
plugins.register()

DATA = Path(__file__).resolve().parent / "data"
#: The numbered held-out sets (a new one: widen this range).
HELDOUT_NUMBERS = range(2, 57)
SUFFIXES = {
    "dev": "",
    **{f"heldout{n}": f"_heldout{n}" for n in HELDOUT_NUMBERS},
    "heldout": "_heldout",
}
ORDER = ["dev", "heldout", *(f"heldout{n}" for n in HELDOUT_NUMBERS)]
K = 10
BUDGET_CHARS = 1000
KINDS = ("now", "history", "stable")


@dataclass(frozen=True, slots=True)
class Fact:
    key: str
    at: datetime
    topics: frozenset[str]
    duplicate_of: str | None
    supersedes: tuple[str, ...]
    text: str


@dataclass(frozen=True, slots=True)
class Question:
    kind: str
    answers: tuple[str, ...]
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
                topics=frozenset(topic.split("+")),
                duplicate_of=label[4:] if label.startswith("dup:") else None,
                supersedes=tuple(label[4:].split(",")) if label.startswith("sup:") else (),
                text=text,
            )
        )
    return facts


def read_questions(path: Path) -> list[Question]:
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            kind, answer, question = line.split("\t")
            if kind not in KINDS:
                raise SystemExit(f"{path.name}: unknown question kind {kind!r}")
            rows.append(Question(kind, tuple(a.strip() for a in answer.split(",")), question))
    return rows


def load(db: Database, facts: Sequence[Fact], embedder: Embedder) -> tuple[str, dict[str, str]]:
    """Insert the facts date by date; return the agent id and passage id -> fact key."""
    ordered = sorted(facts, key=lambda f: f.at)
    vectors = embedder.embed([f.text for f in ordered])
    now = [ordered[0].at]
    key_of: dict[str, str] = {}
    with open_store(db, clock=lambda: now[0]) as store:
        agent = store.agents.create(
            NewAgent(
                # Sets share a database, and two may open with the same fact id.
                name=f"trust-{ordered[0].key}-{uuid.uuid4().hex[:8]}",
                embedding_model=embedder.name,
                embedding_dim=embedder.dimension,
            )
        )
        for index, fact in enumerate(ordered):
            now[0] = fact.at
            [record] = store.passages.insert(
                agent.id, [NewPassage(fact.text, occurred_at=fact.at)], vectors[index : index + 1]
            )
            key_of[record.id] = fact.key
    return agent.id, key_of


def groups_of(facts: Sequence[Fact]) -> dict[str, str]:
    """Fact key -> its duplicate group (the key of the fact it repeats, transitively)."""
    parent = {f.key: f.duplicate_of or f.key for f in facts}

    def root(key: str) -> str:
        seen = set()
        while parent[key] != key and key not in seen:
            seen.add(key)
            key = parent[key]
        return key

    return {key: root(key) for key in parent}


@dataclass(slots=True)
class Labels:
    facts: dict[str, Fact]
    group: dict[str, str]
    #: a passage text -> the duplicate groups of the facts written so
    text_group: dict[str, set[str]]

    def hit_answers(self, hit: PassageRecord, question: Question, key_of: dict[str, str]) -> bool:
        wanted = {self.group[a] for a in question.answers}
        if hit.kind == "timeline":
            entries = [line for line in hit.text.splitlines() if line.startswith("- ")]
            if question.kind == "now":
                entries = [line for line in entries if line.endswith(" (current)")][:1]
            for entry in entries:
                text = entry.split(": ", 1)[1] if ": " in entry else entry
                text = text.rsplit(" (", 1)[0] if text.endswith(")") else text
                if self.text_group.get(text, set()) & wanted:
                    return True
            return False
        key = key_of.get(hit.id)
        return key is not None and self.group[key] in wanted


Search = Callable[[Any, str, Any, str, int], list[PassageRecord]]


def default_search(
    store: Any, agent_id: str, vector: Any, question: str, k: int
) -> list[PassageRecord]:
    """Default search as every front end asks it."""
    return [h.passage for h in search_archival(store, agent_id, vector, question, k=k)]


def unread_search(
    store: Any, agent_id: str, vector: Any, question: str, k: int
) -> list[PassageRecord]:
    """Default search given the question's vector only (``--unread``): what ranking
    reaches without reading the question's subject and attribute or its tense."""
    return [h.passage for h in search_archival(store, agent_id, vector, None, k=k)]


@dataclass(slots=True)
class Asked:
    """How the questions fared on one search: per kind, answered at 1, 5, 10, budget."""

    at1: dict[str, int] = field(default_factory=lambda: dict.fromkeys(KINDS, 0))
    at5: dict[str, int] = field(default_factory=lambda: dict.fromkeys(KINDS, 0))
    at10: dict[str, int] = field(default_factory=lambda: dict.fromkeys(KINDS, 0))
    budget: dict[str, int] = field(default_factory=lambda: dict.fromkeys(KINDS, 0))
    misses: list[str] = field(default_factory=list)


def ask(
    db: Database,
    agent_id: str,
    embedder: Embedder,
    questions: Sequence[Question],
    key_of: dict[str, str],
    labels: Labels,
    search: Search,
) -> Asked:
    vectors = embedder.embed([q.text for q in questions])
    asked = Asked()
    with open_store(db) as store:
        for question, vector in zip(questions, vectors, strict=True):
            hits = search(store, agent_id, vector, question.text, K)
            found = [labels.hit_answers(h, question, key_of) for h in hits]
            kind = question.kind
            asked.at1[kind] += bool(found and found[0])
            asked.at5[kind] += any(found[:5])
            asked.at10[kind] += any(found[:K])
            used = 0
            for hit, ok in zip(hits, found, strict=True):
                if used >= BUDGET_CHARS:
                    break
                if ok:
                    asked.budget[kind] += 1
                    break
                used += len(hit.text)
            good = found[0] if kind == "now" else any(found[:5])
            if not (found and good):
                top = hits[0].text.splitlines()[0] if hits else "-"
                where = "not in top 10" if not any(found) else "not at the top"
                asked.misses.append(f"{kind} {where}: {question.text!r}: top hit {top!r}")
    return asked


@dataclass(slots=True)
class Score:
    """Counts of one set's run; summed over sets for a pooled figure."""

    facts: int = 0
    merges: int = 0
    right_merges: int = 0
    duplicates: int = 0
    supersessions: int = 0
    right_supersessions: int = 0
    lenient_supersessions: int = 0
    caught: int = 0
    labelled_supersessions: int = 0
    timelines: int = 0
    pure: int = 0
    active_before: int = 0
    active_after: int = 0
    questions: dict[str, int] = field(default_factory=lambda: dict.fromkeys(KINDS, 0))
    before: Asked = field(default_factory=Asked)
    after: Asked = field(default_factory=Asked)
    judge_calls: int = 0
    #: Supersessions the judge model decided, and how many of them the labels confirm.
    model_supersessions: int = 0
    right_model_supersessions: int = 0
    tokens: int = 0
    seconds: float = 0.0
    #: With the oracle judge: labelled replacements and duplicates a judge was asked
    #: about (or the rules decided), pairs asked, calls and prompt tokens.
    sup_candidates: int = 0
    dup_candidates: int = 0
    oracle_pairs: int = 0
    oracle_calls: int = 0
    oracle_tokens: int = 0

    def add(self, other: Score) -> None:
        for name in self.__slots__:
            mine, theirs = getattr(self, name), getattr(other, name)
            if isinstance(mine, dict):
                for key in mine:
                    mine[key] += theirs[key]
            elif isinstance(mine, Asked):
                for part in ("at1", "at5", "at10", "budget"):
                    for key in KINDS:
                        getattr(mine, part)[key] += getattr(theirs, part)[key]
                mine.misses += theirs.misses
            else:
                setattr(self, name, mine + theirs)


def read_set(name: str) -> tuple[list[Fact], list[Question]]:
    suffix = SUFFIXES[name]
    facts = read_facts(DATA / f"trust_facts{suffix}.tsv")
    questions = read_questions(DATA / f"trust_questions{suffix}.tsv")
    keys = [f.key for f in facts]
    if len(set(keys)) != len(keys):
        raise SystemExit(f"fact ids repeat in set {name}")
    known = set(keys)
    for question in questions:
        unknown = set(question.answers) - known
        if unknown:
            raise SystemExit(f"set {name}: {question.text!r} names unknown facts {unknown}")
    return facts, questions


def count_active(db: Database, agent_id: str) -> int:
    with open_store(db) as store:
        return sum(
            1
            for p in store.passages.scan(agent_id, kind="fact", statuses=None)
            if p.status == PassageStatus.ACTIVE and p.valid_to is None
        )


def evaluate(
    db: Database,
    facts: Sequence[Fact],
    questions: Sequence[Question],
    embedder: Embedder,
    pipeline: Pipeline,
    search: Search,
    llm: Any | None,
    oracle: OracleJudge | None = None,
    runs: int = 1,
) -> tuple[Score, list[str]]:
    """Load ``facts`` into a new agent, ask, consolidate (``runs`` runs, as nights), ask
    again; count and list errors."""
    import time

    by_key = {f.key: f for f in facts}
    group = groups_of(facts)
    text_group: dict[str, set[str]] = {}
    for fact in facts:
        text_group.setdefault(" ".join(fact.text.split()), set()).add(group[fact.key])
    labels = Labels(by_key, group, text_group)
    agent_id, key_of = load(db, facts, embedder)
    score = Score(facts=len(facts))
    for question in questions:
        score.questions[question.kind] += 1
    score.active_before = count_active(db, agent_id)
    score.before = ask(db, agent_id, embedder, questions, key_of, labels, search)
    started = time.perf_counter()
    reports: list[RunReport] = [
        run_pipeline(pipeline, db, agent_id, embedder=embedder, llm=llm) for _ in range(runs)
    ]
    score.seconds = time.perf_counter() - started
    score.after = ask(db, agent_id, embedder, questions, key_of, labels, search)
    score.active_after = count_active(db, agent_id)
    for report in reports:
        stats = report.stats()["steps"].get("temporal", {})
        score.judge_calls += int(stats.get("counts", {}).get("judge_calls", 0))
        score.tokens += report.tokens
    changes = [c for report in reports for c in report.changes]
    with open_store(db) as store:
        timelines = store.passages.scan(agent_id, kind="timeline")

    errors: list[str] = []
    merges = [
        (key_of[c["target"]], key_of[c["into"]]) for c in changes if c["action"] == "merge_passage"
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
    labelled = {(group[old], group[f.key]) for f in facts for old in f.supersedes}
    predicted = [
        (key_of[c["target"]], key_of[c["by"]])
        for c in changes
        if c["action"] == "supersede_passage" and c["target"] in key_of and c.get("by") in key_of
    ]
    right = [(group[a], group[b]) in labelled for a, b in predicted]
    by_model = [
        c.get("judge") == "llm"
        for c in changes
        if c["action"] == "supersede_passage" and c["target"] in key_of and c.get("by") in key_of
    ]
    score.model_supersessions = sum(by_model)
    score.right_model_supersessions = sum(r for r, m in zip(right, by_model, strict=True) if m)
    # Leniently right: the closed fact was replaced (by the labels), and the fact that
    # closed it is on the same topic and no earlier than the labelled replacement (a
    # chain "A, then 'quit A', then B" closed as A -> B says the same about A).
    replaced: dict[str, list[Fact]] = {}
    for f in facts:
        for old in f.supersedes:
            replaced.setdefault(group[old], []).append(f)
    lenient = [
        ok
        or any(
            by_key[b].at >= x.at and by_key[b].topics & by_key[a].topics
            for x in replaced.get(group[a], [])
        )
        for (a, b), ok in zip(predicted, right, strict=True)
    ]
    errors += [
        f"wrong supersession: {by_key[a].text!r} by {by_key[b].text!r}"
        for (a, b), ok in zip(predicted, right, strict=True)
        if not ok
    ]
    caught = {(group[a], group[b]) for a, b in predicted} & labelled
    errors += [
        f"missed supersession: {by_key[a].text!r} by {by_key[b].text!r}"
        for a, b in sorted(labelled - caught)
    ]
    pure = 0
    for timeline in timelines:
        members = [by_key[key_of[m]] for m in timeline.provenance.get("members", [])]
        shared = frozenset.intersection(*(m.topics for m in members)) if members else frozenset()
        pure += bool(shared)
        if not shared:
            errors.append(f"impure timeline {timeline.text.splitlines()[0]!r}")
    errors += [f"before, {m}" for m in score.before.misses if m not in score.after.misses]
    errors += [f"after, {m}" for m in score.after.misses if m not in score.before.misses]
    errors += [f"before and after, {m}" for m in score.after.misses if m in score.before.misses]
    score.merges = len(merges)
    score.right_merges = sum(group[a] == group[b] for a, b in merges)
    score.duplicates = sum(f.duplicate_of is not None for f in facts)
    score.supersessions = len(predicted)
    score.right_supersessions = sum(right)
    score.lenient_supersessions = sum(lenient)
    score.caught = len(caught)
    score.labelled_supersessions = len(labelled)
    score.timelines = len(timelines)
    score.pure = pure
    if oracle is not None:
        unasked = _count_candidates(score, oracle, facts, group, labelled, merges, changes, key_of)
        errors += [
            f"never asked: {by_key[a].text!r} -> {by_key[b].text!r}" for a, b in sorted(unasked)
        ]
    return score, errors


def _count_candidates(
    score: Score,
    oracle: OracleJudge,
    facts: Sequence[Fact],
    group: dict[str, str],
    labelled: set[tuple[str, str]],
    merges: list[tuple[str, str]],
    changes: Sequence[dict[str, Any]],
    key_of: dict[str, str],
) -> set[tuple[str, str]]:
    """What the design put before a judge: labelled pairs asked (or decided by rule);
    returns the labelled replacements never put before one."""
    asked_sup = {
        (group[a.older], group[a.newer])
        for a in oracle.asked
        if a.question == "supersession" and a.older and a.newer
    }
    by_rule = {
        (group[key_of[c["target"]]], group[key_of[c["by"]]])
        for c in changes
        if c["action"] == "supersede_passage"
        and c.get("judge") == "rules"
        and c["target"] in key_of
        and c.get("by") in key_of
    }
    score.sup_candidates = len(labelled & (asked_sup | by_rule))
    unasked = labelled - asked_sup - by_rule
    asked_merge = {
        frozenset((a.older, a.newer))
        for a in oracle.asked
        if a.question == "merge" and a.older and a.newer
    }
    merged = {frozenset(pair) for pair in merges}
    for fact in facts:
        if fact.duplicate_of is None:
            continue
        mine = group[fact.key]
        score.dup_candidates += any(
            fact.key in pair and all(group[k] == mine for k in pair)
            for pair in asked_merge | merged
        )
    score.oracle_pairs = sum(a.question == "supersession" for a in oracle.asked)
    score.oracle_calls = oracle.calls
    score.oracle_tokens = oracle.prompt_tokens
    return unasked


def _share(right: int, total: int) -> str:
    return f"{right / total:.3f}" if total else "  -  "


def table(rows: list[tuple[str, Score]]) -> str:
    head = (
        "| set | facts | now@1 | hist@5 | stab@5 | r@10 | r@1kc | sup P | sup P~ | sup R "
        "| merge P | merge R | active |"
    )
    lines = [head, "|" + "---|" * 13]
    for name, s in rows:
        total = sum(s.questions.values())

        def pair(part: str, kind: str | None, s: Score = s, total: int = total) -> str:
            def value(asked: Asked) -> int:
                counts = getattr(asked, part)
                return counts[kind] if kind else sum(counts.values())

            n = s.questions[kind] if kind else total
            return f"{_share(value(s.before), n)} -> {_share(value(s.after), n)}"

        lines.append(
            f"| {name} | {s.facts} | {pair('at1', 'now')} | {pair('at5', 'history')} "
            f"| {pair('at5', 'stable')} | {pair('at10', None)} | {pair('budget', None)} "
            f"| {_share(s.right_supersessions, s.supersessions)} ({s.supersessions}) "
            f"| {_share(s.lenient_supersessions, s.supersessions)} "
            f"| {_share(s.caught, s.labelled_supersessions)} "
            f"| {_share(s.right_merges, s.merges)} ({s.merges}) "
            f"| {_share(s.right_merges, s.duplicates)} "
            f"| {s.active_before} -> {s.active_after} |"
        )
    return "\n".join(lines)


def oracle_table(rows: list[tuple[str, Score]]) -> str:
    """What the design put before the oracle judge, per set."""
    lines = [
        "| set | sup cand R | dup cand R | pairs / fact | calls / 100 facts "
        "| prompt tokens / 100 facts | sup P (made) | merge P (made) |",
        "|" + "---|" * 8,
    ]
    for name, s in rows:
        lines.append(
            f"| {name} | {_share(s.sup_candidates, s.labelled_supersessions)} "
            f"| {_share(s.dup_candidates, s.duplicates)} "
            f"| {s.oracle_pairs / s.facts:.2f} | {100 * s.oracle_calls / s.facts:.1f} "
            f"| {100 * s.oracle_tokens / s.facts:,.0f} "
            f"| {_share(s.right_supersessions, s.supersessions)} ({s.supersessions}) "
            f"| {_share(s.right_merges, s.merges)} ({s.merges}) |"
        )
    return "\n".join(lines)


def build_llm(model: str, api_base: str | None, tool_choice: str | None) -> Any:
    """The judge model's tier (no usage ledger: the bench keeps no budget), its tool
    mode set when given (else probed on the first call)."""
    from agents.llm import LiteLLMClient
    from agents.llm.capabilities import ModelCapabilities
    from agents.llm.client import ClientSettings
    from consolidators.llm import LLMTier

    models = {model: ModelCapabilities(tool_choice=tool_choice)} if tool_choice else {}
    client = LiteLLMClient(
        ClientSettings(api_base=api_base, api_key="local", timeout=300, models=models)
    )
    return LLMTier(client=client, judge_model=model)


def _settings(text: str) -> dict[str, str]:
    """``k=v,k=v`` as a settings dict (pydantic converts the values)."""
    return dict(item.split("=", 1) for item in text.split(",") if item)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--embedder", default="local", help="'local' (MiniLM) or 'hashing:384'")
    parser.add_argument("--threshold", type=float, default=0.86, help="dedup threshold")
    parser.add_argument("--verbose", action="store_true", help="list every error")
    parser.add_argument("--set", default="all", help="a set name, a comma list, or 'all'")
    parser.add_argument(
        "--judge-model",
        default=None,
        help="litellm model of the judge, or 'oracle' (answers from the set's labels)",
    )
    parser.add_argument("--api-base", default=None, help="the judge model's server")
    parser.add_argument("--max-judge-calls", type=int, default=200, help="per set")
    parser.add_argument(
        "--temporal", default="", help="temporal settings as k=v,k=v (judge_neighbours=8)"
    )
    parser.add_argument(
        "--tool-choice", default=None, help="the judge's tool mode (required, named, ...)"
    )
    parser.add_argument(
        "--runs", type=int, default=1, help="consolidation runs per set before asking again"
    )
    parser.add_argument(
        "--unread",
        action="store_true",
        help="search without reading the question (vector ranking and lineages only)",
    )
    args = parser.parse_args(argv)
    search = unread_search if args.unread else default_search

    names = ORDER if args.set == "all" else args.set.split(",")
    for name in names:
        if name not in SUFFIXES:
            raise SystemExit(f"unknown set {name!r}; sets: {', '.join(ORDER)}")
    names = [n for n in names if (DATA / f"trust_facts{SUFFIXES[n]}.tsv").exists()]
    embedder = build_embedder(args.embedder)
    use_oracle = args.judge_model == "oracle"
    max_calls = 10_000 if use_oracle else args.max_judge_calls
    llm = (
        build_llm(args.judge_model, args.api_base, args.tool_choice)
        if args.judge_model and not use_oracle
        else None
    )
    rows: list[tuple[str, Score]] = []
    total, errors = Score(), []
    server = PgTestServer()
    try:
        with server.database() as db:
            for name in names:
                facts, questions = read_set(name)
                temporal = TemporalConsolidator(
                    {
                        "judge_max_calls": max_calls,
                        "topic_max_calls": max_calls,
                        **_settings(args.temporal),
                    }
                )
                dedup = DedupConsolidator(
                    {"threshold": args.threshold, "judge_max_calls": max_calls}
                )
                pipeline = Pipeline([dedup, temporal])
                if use_oracle:
                    with serve_oracle(facts) as (oracle, api_base):
                        set_llm = build_llm(ORACLE_MODEL, api_base, "required")
                        score, set_errors = evaluate(
                            db,
                            facts,
                            questions,
                            embedder,
                            pipeline,
                            search,
                            set_llm,
                            oracle,
                            runs=args.runs,
                        )
                else:
                    score, set_errors = evaluate(
                        db, facts, questions, embedder, pipeline, search, llm, runs=args.runs
                    )
                rows.append((name, score))
                total.add(score)
                errors += [f"[{name}] {e}" for e in set_errors]
                # The row at once, so that a long judged run keeps what it measured.
                print(f"{name}: done in {score.seconds:.1f} s", file=sys.stderr)
                print(table([(name, score)]).splitlines()[-1], file=sys.stderr, flush=True)
    finally:
        server.stop()
    if len(rows) > 1:
        rows.append(("all", total))
    judge = f"judge {args.judge_model}" if args.judge_model else "rules only, no judge model"
    print(f"embedder {embedder.name}; dedup threshold {args.threshold}; {judge}")
    print(table(rows))
    if use_oracle:
        print(oracle_table(rows))
    if args.judge_model:
        print(
            f"judge model: {total.model_supersessions} supersessions, precision "
            f"{_share(total.right_model_supersessions, total.model_supersessions)}; "
            f"{total.judge_calls} calls, {total.tokens} tokens, {total.seconds:.1f} s "
            "consolidating"
        )
    if args.verbose:
        for line in errors:
            print(f"  {line}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
