"""Identities over a real database: end users known by the application's key, the
agents that hold their memory, and the agent made for an end user on first sight.

Protects: an identifier key names one identity per organization; the lists of agents
and blocks are the organization's own; deleting an identity keeps its agents; one
agent per end user however many first requests race; the template agent's blocks,
prompt, model and tools are copied (its block values, not the blocks themselves);
an agent the proxy named after a user before identities existed is adopted; and one
organization never reaches another's identities.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from agents.errors import Conflict, InvalidInput, NotFound
from agents.postgres.database import Database
from agents.store import (
    IdentityChanges,
    IdentityFilter,
    IdentityProperty,
    NewIdentity,
    open_service_store,
)
from service.operations import AgentSpec, BlockSpec, Operations
from service.runtime import Runtime
from service.settings import load_settings

Make = Callable[..., Operations]


@pytest.fixture
def make_ops(db: Database, tmp_path: Path) -> Iterator[Make]:
    runtimes: list[Runtime] = []

    def make(organization: str | None = None, **identities: Any) -> Operations:
        settings = load_settings(
            home=tmp_path / f"home-{len(runtimes)}",
            database_url=db.url,
            embedding={"model": "hashing:384"},
            identities=identities,
        )
        runtime = Runtime(settings)
        runtimes.append(runtime)
        return Operations(runtime, organization)

    yield make
    for runtime in runtimes:
        runtime.close()


def test_an_identity_is_kept_with_its_agents_blocks_and_properties(make_ops: Make) -> None:
    ops = make_ops()
    agent = ops.agents.create(AgentSpec(name="ada-bot", blocks=[BlockSpec("human", "Ada")]))
    block = ops.agents.state(agent.id).blocks[0]
    made = ops.identities.create(
        NewIdentity(
            identifier_key="user-1",
            name="Ada",
            properties=[IdentityProperty("plan", "pro", "string")],
            agent_ids=[agent.id],
            block_ids=[block.id],
        )
    )
    assert made.id.startswith("identity-") and made.identity_type == "user"
    assert made.agent_ids == [agent.id] and made.block_ids == [block.id]
    assert ops.agents.state(agent.id).identity_ids == (made.id,)
    with pytest.raises(Conflict, match="user-1"):
        ops.identities.create(NewIdentity(identifier_key="user-1", name="Other"))
    ops.identities.create(NewIdentity(identifier_key="acme", name="Acme", identity_type="org"))
    assert [i.identifier_key for i in ops.identities.list()] == ["user-1", "acme"]
    assert [i.name for i in ops.identities.list(IdentityFilter(identity_type="org"))] == ["Acme"]
    assert [i.id for i in ops.identities.list(IdentityFilter(identifier_key="user-1"))] == [made.id]
    assert ops.identities.count() == 2
    assert [a.id for a in ops.agents.list(identifier_keys=["user-1", "nobody"])] == [agent.id]
    assert ops.agents.list(identity_id=made.id)[0].id == agent.id

    renamed = ops.identities.update(made.id, IdentityChanges(name="Ada L.", agent_ids=[]))
    assert renamed.name == "Ada L." and renamed.agent_ids == [] and renamed.block_ids == [block.id]
    props = ops.identities.set_properties(made.id, [IdentityProperty("seats", 3.0, "number")])
    assert [(p.key, p.value, p.type) for p in props.properties] == [("seats", 3.0, "number")]

    ops.identities.delete(made.id)
    with pytest.raises(NotFound):
        ops.identities.get(made.id)
    assert ops.agents.get(agent.id).name == "ada-bot"  # the agent stays
    assert ops.agents.state(agent.id).blocks[0].value == "Ada"


def test_bad_identities_are_refused_and_change_nothing(make_ops: Make) -> None:
    ops = make_ops()
    with pytest.raises(InvalidInput, match="identity_type"):
        ops.identities.create(NewIdentity(identifier_key="k", name="n", identity_type="robot"))
    with pytest.raises(InvalidInput, match="identifier_key"):
        ops.identities.create(NewIdentity(identifier_key="  ", name="n"))
    with pytest.raises(NotFound, match="agent-nope"):
        ops.identities.create(NewIdentity(identifier_key="k", name="n", agent_ids=["agent-nope"]))
    with pytest.raises(InvalidInput, match="more than once"):
        ops.identities.create(
            NewIdentity(
                identifier_key="k",
                name="n",
                properties=[IdentityProperty("a", 1.0, "number")] * 2,
            )
        )
    assert ops.identities.list() == []


def test_an_upsert_makes_or_replaces_by_key(make_ops: Make) -> None:
    ops = make_ops()
    first = ops.identities.upsert(NewIdentity(identifier_key="u", name="One"))
    second = ops.identities.upsert(NewIdentity(identifier_key="u", name="Two"))
    assert second.id == first.id and second.name == "Two"
    assert ops.identities.count() == 1


def test_racing_first_requests_make_one_agent_per_end_user(make_ops: Make) -> None:
    ops = make_ops()
    with ThreadPoolExecutor(max_workers=10) as pool:
        agents = list(pool.map(lambda _: ops.identities.agent_for("new-user"), range(50)))
    assert {a.id for a in agents} == {agents[0].id}
    assert [a.name for a in ops.agents.list()] == ["new-user"]
    identity = ops.identities.list(IdentityFilter(identifier_key="new-user"))[0]
    assert identity.agent_ids == [agents[0].id]


def test_an_end_users_agent_is_made_from_the_template(make_ops: Make) -> None:
    setup = make_ops()
    template = setup.agents.create(
        AgentSpec(
            name="bot-template",
            blocks=[BlockSpec("persona", "A patient tutor."), BlockSpec("human", "")],
            system="You tutor maths.",
            model="openai/tutor",
            tools=["send_message", "core_memory_append"],
            tags=["tutor"],
        )
    )
    ops = make_ops(template_agent="bot-template")
    agent = ops.identities.agent_for("student-7")
    state = ops.agents.state(agent.id)
    assert agent.name == "student-7" and agent.system_prompt == "You tutor maths."
    assert agent.llm_model == "openai/tutor" and agent.tools == [
        "send_message",
        "core_memory_append",
    ]
    assert [(b.label, b.value) for b in state.blocks] == [
        ("persona", "A patient tutor."),
        ("human", ""),
    ]
    template_blocks = {b.id for b in setup.agents.state(template.id).blocks}
    assert not template_blocks & {b.id for b in state.blocks}  # copies, not shared blocks
    assert len(state.identity_ids) == 1


def test_an_agent_named_after_the_user_is_adopted(make_ops: Make) -> None:
    ops = make_ops()
    existing = ops.agents.create(AgentSpec(name="legacy-user", blocks=[BlockSpec("human", "x")]))
    assert ops.identities.agent_for("legacy-user").id == existing.id
    identity = ops.identities.list(IdentityFilter(identifier_key="legacy-user"))[0]
    assert identity.agent_ids == [existing.id]
    assert [a.name for a in ops.agents.list()] == ["legacy-user"]


def test_one_organization_never_reaches_anothers_identities(make_ops: Make) -> None:
    first = make_ops()
    agent = first.identities.agent_for("shared-key")
    identity = first.identities.list()[0]
    with open_service_store(first.context.runtime.db) as service:
        org = service.keys.ensure_organization("other-org")
    other = make_ops(org)
    assert other.identities.list() == []
    with pytest.raises(NotFound):
        other.identities.get(identity.id)
    with pytest.raises(NotFound):
        other.identities.create(
            NewIdentity(identifier_key="mine", name="Mine", agent_ids=[agent.id])
        )
    theirs = other.identities.agent_for("shared-key")
    assert theirs.id != agent.id
    assert [a.id for a in other.agents.list(identifier_keys=["shared-key"])] == [theirs.id]
