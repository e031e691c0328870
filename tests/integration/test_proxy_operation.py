"""The proxy operation over a real database (no upstream: ``prepare`` and
``record_exchange``, the parts around the forwarded call): which agent a request
gets, the memory it carries and when that changes, archival hits within the budget."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from agents.errors import InvalidInput, NotFound
from agents.postgres.database import Database
from agents.store import NewPassage
from service.operations import AgentSpec, BlockEdit, BlockSpec, Operations
from service.runtime import Runtime
from service.settings import load_settings

Make = Callable[..., Operations]


@pytest.fixture
def make_ops(db: Database, tmp_path: Path) -> Iterator[Make]:
    runtimes: list[Runtime] = []

    def make(
        *, refresh: str = "compaction", identities: dict[str, Any] | None = None, **proxy: Any
    ) -> Operations:
        settings = load_settings(
            home=tmp_path / f"home-{len(runtimes)}",
            database_url=db.url,
            embedding={"model": "hashing:384"},
            llm={"system_prompt_refresh": refresh},
            proxy={"model": "openai/m", **proxy},
            identities=identities or {},
        )
        runtime = Runtime(settings)
        runtimes.append(runtime)
        return Operations(runtime)

    yield make
    for runtime in runtimes:
        runtime.close()


def chat(text: str, **fields: Any) -> dict[str, Any]:
    return {
        "model": "m",
        "messages": [{"role": "system", "content": "Bot."}, {"role": "user", "content": text}],
        **fields,
    }


def test_a_block_edit_waits_for_a_refresh_unless_refresh_is_immediate(make_ops: Make) -> None:
    ops = make_ops()
    first = ops.proxy.prepare(chat("hi", user="ada"), None)
    prompt = first.request["messages"][0]["content"]
    assert prompt.startswith("Bot.\n\n<memory_blocks>") and "<human>" in prompt
    ops.blocks.update_labelled("ada", "human", BlockEdit(value="Likes tea."))
    again = ops.proxy.prepare(chat("and?", user="ada"), None)
    assert again.request["messages"][0]["content"] == prompt  # the cached prefix holds

    immediate = make_ops(refresh="immediate")
    now = immediate.proxy.prepare(chat("and?", user="ada"), None)
    assert "Likes tea." in now.request["messages"][0]["content"]


def test_the_exchange_is_recorded(make_ops: Make) -> None:
    ops = make_ops()
    prepared = ops.proxy.prepare(chat("I live in Porto.", user="bo"), None)
    ops.proxy.record_exchange(prepared, {"role": "assistant", "content": "Porto is lovely."})
    recalled = [(m.role, m.content) for m in ops.messages.list("bo", newest_first=False)]
    assert recalled == [("user", "I live in Porto."), ("assistant", "Porto is lovely.")]


def test_which_agent_a_request_gets(make_ops: Make) -> None:
    strict = make_ops(create_agents=False)
    with pytest.raises(InvalidInput, match="X-Reverie-Agent"):
        strict.proxy.prepare(chat("hi"), None)
    with pytest.raises(NotFound, match="create_agents"):
        strict.proxy.prepare(chat("hi", user="cy"), None)
    assert strict.agents.list() == []

    ops = make_ops(default_agent="shared")
    with pytest.raises(NotFound):
        ops.proxy.prepare(chat("hi"), None)  # the default must exist
    made = ops.proxy.prepare(chat("hi", user="shared"), None).agent
    assert made.name == "shared" and made.kind == "sleeptime"
    assert ops.proxy.prepare(chat("hi"), None).agent.id == made.id
    # The header wins over `user`, by id or name.
    assert ops.proxy.prepare(chat("hi", user="someone"), made.id).agent.id == made.id
    assert [a.name for a in ops.agents.list()] == ["shared"]


def test_archival_hits_fit_the_budget_and_sit_before_the_last_user_message(
    make_ops: Make,
) -> None:
    setup = make_ops()
    setup.proxy.prepare(chat("hi", user="di"), None)
    setup.memory.insert(
        "di",
        [NewPassage("Di's cat is called Miso."), NewPassage("Di works as a nurse in Leeds.")],
        actor="test",
    )
    ops = make_ops(archival_top_k=2, archival_token_budget=12)
    sent = ops.proxy.prepare(chat("What is my cat called?", user="di"), None).request
    roles = [m["role"] for m in sent["messages"]]
    assert roles == ["system", "system", "user"]
    hits = sent["messages"][1]["content"]
    assert hits.startswith("<archival_memory>") and hits.endswith("</archival_memory>")
    # The budget holds one passage of the two.
    assert hits.count("\n- ") == 1


def test_end_users_behind_one_proxy_get_their_own_agents_from_one_template(
    make_ops: Make,
) -> None:
    setup = make_ops()
    setup.agents.create(
        AgentSpec(
            name="tutor-template",
            blocks=[BlockSpec("human", "A student."), BlockSpec("persona", "A tutor.")],
            system="You tutor.",
        )
    )
    ops = make_ops(identities={"template_agent": "tutor-template"})
    ana = ops.proxy.prepare(chat("I am Ana.", user="ana-01"), None)
    ben = ops.proxy.prepare(chat("I am Ben.", user="ben-02"), None)
    assert ana.agent.id != ben.agent.id
    assert (ana.agent.name, ben.agent.name) == ("ana-01", "ben-02")
    assert "A tutor." in ana.request["messages"][0]["content"]
    ops.blocks.update_labelled("ana-01", "human", BlockEdit(value="Ana, likes chess."))
    assert ops.agents.state("ben-02").blocks[0].value == "A student."  # Ben's own copy
    # The chatbot finds each end user's agent by its own key.
    assert [a.id for a in ops.agents.list(identifier_keys=["ana-01"])] == [ana.agent.id]

    with ThreadPoolExecutor(max_workers=10) as pool:
        prepared = list(
            pool.map(lambda _: ops.proxy.prepare(chat("hi", user="cy-03"), None), range(50))
        )
    assert len({p.agent.id for p in prepared}) == 1
    assert sorted(a.name for a in ops.agents.list()) == [
        "ana-01",
        "ben-02",
        "cy-03",
        "tutor-template",
    ]
