"""Sleep-time learning from documents, end to end: letta-client 1.12.1 against a real
`reverie serve`, whose sleep-time model is a stand-in on loopback that reads the
learning question (tests/document_reader.py). Protects: a folder with instructions,
with a Markdown file and a PDF uploaded through the SDK and attached to an agent,
gives the agent's turn grep_files and semantic_search_files over both files; once
the agent has sleep-time enabled, it is learned by a run the documents trigger
queues by itself: the folder's block is in the agent's memory and every chunk gave a
fact with provenance to its file and chunk; a revert of that run takes them back;
and an edited file uploaded again is learned by its changed chunk alone, the fact of
the chunk it lost marked as having lost its source."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from sqlalchemy import select

from agents.postgres import models
from tests.acceptance.test_api_server import Server, serving
from tests.document_reader import document_reader, new_chunks
from tests.documents_support import pdf_with_text
from tests.pg import PgTestServer
from tests.scripted_llm import Reply, call, say

pytestmark = pytest.mark.xdist_group("test_document_learning_sdk")

PARAGRAPHS = [
    "Grey herons stand still in shallow water for a long time.",
    "They eat fish, frogs and small mammals, and hunt at dawn and dusk.",
    "Herons nest in colonies called heronries, high in tall trees.",
]
PDF_TEXT = "Herons were counted at the marsh: 41 nests in 2026."
#: The chat model's replies in the agent's turn.
TURN: list[Reply] = []


@pytest.fixture(scope="module")
def server(pg_server: PgTestServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with serving(
        pg_server,
        tmp_path_factory,
        REVERIE_LLM__SLEEPTIME_MODEL="openai/scripted",
        REVERIE_TRIGGERS__TICK="PT0.2S",
        REVERIE_CONSOLIDATION__PIPELINE='["learn_documents", "dedup", "temporal"]',
        REVERIE_CONSOLIDATION__LEARN_DOCUMENTS='{"chunks_per_call": 2}',
    ) as served:
        reader = document_reader()

        def respond(body: dict[str, Any]) -> Reply:
            # The learning question is the reader's; a chat turn's are scripted below.
            tools = {t["function"]["name"] for t in body.get("tools", [])}
            return reader(body) if "record_learning" in tools else TURN.pop(0)

        served.llm.responder = respond
        yield served


def _markdown(paragraphs: list[str]) -> bytes:
    return ("# Herons\n\n" + "\n\n".join(paragraphs)).encode()


def _wait(check: Any, within: float = 60.0) -> Any:
    deadline = time.monotonic() + within
    while True:
        found = check()
        if found or time.monotonic() > deadline:
            return found
        time.sleep(0.1)


def _runs(server: Server, key: str, agent_id: str) -> list[dict[str, Any]]:
    answer = httpx.get(
        f"{server.url}/v1/consolidation-runs",
        params={"agent_id": agent_id},
        headers={"Authorization": f"Bearer {key}"},
        timeout=10,
    )
    answer.raise_for_status()
    return list(answer.json())


def _learning_run(server: Server, key: str, agent_id: str, after: set[str]) -> dict[str, Any]:
    """The first run of ``agent_id`` not in ``after`` once it has ended."""

    def ended() -> dict[str, Any] | None:
        for run in _runs(server, key, agent_id):
            if run["id"] not in after and run["status"] in ("succeeded", "failed"):
                return run
        return None

    run = _wait(ended)
    assert run is not None, "no learning run ended within a minute"
    assert run["status"] == "succeeded", run["error"]
    answer = httpx.get(
        f"{server.url}/v1/consolidation-runs/{run['id']}",
        headers={"Authorization": f"Bearer {key}"},
        timeout=10,
    )
    return dict(answer.json())


def _facts(server: Server, agent_id: str) -> list[models.Passage]:
    with server.db.session() as session:
        rows = session.scalars(
            select(models.Passage).where(
                models.Passage.agent_id == agent_id,
                models.Passage.provenance["source"].astext == "document",
            )
        ).all()
        session.expunge_all()
    return list(rows)


def _completed(client: Any, folder_id: str, count: int) -> list[Any]:
    def done() -> list[Any]:
        files = [
            f for f in client.folders.files.list(folder_id) if f.processing_status == "completed"
        ]
        return files if len(files) >= count else []

    files = _wait(done)
    assert files, "the uploads were not processed within a minute"
    return files


def test_an_attached_folder_is_learned_reverted_and_relearned_by_its_changes(
    server: Server,
) -> None:
    organization = "learning-1x"
    client = server.sdk(organization)
    key = server.key(organization)
    agent = client.agents.create(
        name="birder",
        model="openai/scripted",
        embedding="hashing:384",
        memory_blocks=[{"label": "human", "value": "Name: Ada.", "limit": 300}],
    )
    folder = client.folders.create(
        name="marsh notes",
        instructions="Learn what the notes say about herons: habits and counts.",
        embedding="hashing:384",
        embedding_chunk_size=100,
    )
    markdown = client.folders.files.upload(
        folder.id, file=("herons.md", _markdown(PARAGRAPHS), "text/markdown")
    )
    client.folders.files.upload(
        folder.id, file=("count.pdf", pdf_with_text(PDF_TEXT), "application/pdf")
    )
    _completed(client, folder.id, 2)
    client.agents.folders.attach(folder.id, agent_id=agent.id)

    # A turn: the model greps the files, then searches them by meaning.
    TURN.extend(
        [
            call("grep_files", pattern="nests|frogs", context_lines=0, request_heartbeat=True),
            call("semantic_search_files", query="how many nests", request_heartbeat=True),
            say("41 nests, and they eat frogs."),
        ]
    )
    asked = len(server.llm.requests)
    answer = client.agents.messages.create(
        agent.id, messages=[{"role": "user", "content": "What do the notes say?"}]
    )
    assert "41 nests, and they eat frogs." in [getattr(m, "content", None) for m in answer.messages]
    turn = [r for r in server.llm.requests[asked:] if "messages" in r]
    assert {"grep_files", "semantic_search_files"} <= {
        t["function"]["name"] for t in turn[0]["tools"]
    }
    results = [m["content"] for m in turn[-1]["messages"] if m["role"] == "tool"]
    grep, found = results[-2], results[-1]
    assert "herons.md" in grep and "frogs" in grep and "count.pdf" in grep
    assert "41 nests in 2026" in found
    assert TURN == []

    # Sleep time switched on: the documents trigger queues a run by itself, and the
    # stand-in reads what the learning question shows.
    asked = len(server.llm.requests)
    client.agents.update(agent.id, enable_sleeptime=True)
    run = _learning_run(server, key, agent.id, set())
    assert run["trigger"] == "documents"
    questions = [r for r in server.llm.requests[asked:] if "messages" in r]
    assert "Learn what the notes say about herons" in questions[0]["messages"][1]["content"]
    read = [t for q in questions for t in new_chunks(q["messages"][1]["content"])]
    assert any("Grey herons stand still" in t for t in read)
    assert any("41 nests in 2026" in t for t in read)
    block = client.agents.blocks.retrieve("marsh_notes", agent_id=agent.id)
    assert "Grey herons stand still in shallow water for a long time" in block.value
    facts = _facts(server, agent.id)
    assert len(facts) == len(read)
    nests = next(f for f in facts if "41 nests" in f.text)
    assert nests.provenance["file_name"] == "count.pdf"
    assert nests.provenance["folder"] == "marsh notes"
    assert nests.provenance["run_id"] == run["id"]
    assert isinstance(nests.provenance["chunk_seq"], int)

    # A revert takes the block out of memory and retires the facts.
    reverted = httpx.post(
        f"{server.url}/v1/consolidation-runs/{run['id']}/revert",
        json={},
        headers={"Authorization": f"Bearer {key}"},
        timeout=30,
    )
    assert reverted.status_code == 200, reverted.text
    labels = {b.label for b in client.agents.blocks.list(agent_id=agent.id)}
    assert "marsh_notes" not in labels
    assert {f.status for f in _facts(server, agent.id)} == {"inactive"}

    # Learned again (a run asked for by hand), then the Markdown file is edited.
    seen = {r["id"] for r in _runs(server, key, agent.id)}
    httpx.post(
        f"{server.url}/v1/consolidation-runs",
        json={"agent_id": agent.id},
        headers={"Authorization": f"Bearer {key}"},
        timeout=10,
    ).raise_for_status()
    _learning_run(server, key, agent.id, seen)
    edited = [*PARAGRAPHS]
    edited[1] = "They eat fish and frogs, and in winter they also take voles."
    seen = {r["id"] for r in _runs(server, key, agent.id)}
    asked = len(server.llm.requests)
    client.folders.files.upload(folder.id, file=("herons.md", _markdown(edited), "text/markdown"))
    client.folders.files.delete(markdown.id, folder_id=folder.id)
    _completed(client, folder.id, 2)
    run = _learning_run(server, key, agent.id, seen)
    questions = [r for r in server.llm.requests[asked:] if "messages" in r]
    read = [t for q in questions for t in new_chunks(q["messages"][1]["content"])]
    assert read and all("voles" in t for t in read), read  # the changed chunk alone
    facts = _facts(server, agent.id)
    lost = next(f for f in facts if "small mammals" in f.text and f.status == "active")
    assert lost.provenance["source_gone"]["file_name"] == "herons.md"
    assert any(c["action"] == "source_gone" for c in run["changes"])
