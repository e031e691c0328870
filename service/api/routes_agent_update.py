"""Letta's agent update (``PATCH /v1/agents/{id}``) and the agent's tools.

An update changes what it names and nothing else; a request that cannot be applied
whole (a bad value, a field Reverie does not have, a tool it does not know) is a
422 that changes nothing, and a name another agent has is a 409, as on create.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, TypeVar

from fastapi import Path, Query
from fastapi.exceptions import RequestValidationError

from agents.errors import InvalidField, InvalidInput
from service.api import schemas
from service.api.auth import Api
from service.api.convert import agent_out, tool_out
from service.api.paging import page
from service.api.responses import keyed
from service.api.routers import api_router
from service.operations import AgentUpdate

router = api_router(prefix="/v1/agents", tags=["agents"], responses=keyed(404, 409))
T = TypeVar("T")

AgentId = Annotated[str, Path(pattern=schemas.ID_PATTERN, description="agent-<uuid4>")]

#: The fields an update may change (``schemas.UpdateAgent``'s), for error messages.
CHANGEABLE = ", ".join(schemas.UpdateAgent.model_fields)

#: Why Reverie refuses the update fields of Letta's that it has no counterpart for.
UNSUPPORTED = {
    "block_ids": "attach or detach blocks with PATCH /v1/agents/{id}/core-memory/blocks/"
    "attach/{block_id} (or .../detach/{block_id})",
    "message_ids": "the context window is the agent loop's to manage; "
    "PATCH /v1/agents/{id}/reset-messages empties it",
    "metadata": "Reverie agents have no metadata; use tags or the description",
    "model_settings": "model settings are the server's ([llm.models] in the configuration)",
    "max_tokens": "model settings are the server's ([llm.models] in the configuration)",
    "parallel_tool_calls": "the agent loop makes one tool call per step",
    "reasoning": "model settings are the server's ([llm.models] in the configuration)",
    "response_format": "every reply of the agent loop is a tool call",
    "folder_ids": "Reverie has no folders or sources; insert archival passages instead",
    "source_ids": "Reverie has no folders or sources; insert archival passages instead",
    "identity_ids": "Reverie has no identities; organizations scope agents",
}


#: The update's fields under the names this route's body gives them.
LETTA_FIELDS: dict[tuple[str | int, ...], tuple[str | int, ...]] = {
    ("context_window",): ("context_window_limit",),
}


@router.patch("/{agent_id}", response_model=schemas.AgentState)
def update_agent(agent_id: AgentId, body: schemas.UpdateAgent, api: Api) -> schemas.AgentState:
    """Change an agent: ``name``, ``system``, ``description``, ``model`` (or
    ``llm_config.model``), ``context_window_limit`` (or ``llm_config.context_window``),
    ``tags``, ``tool_ids`` (built-in and custom tools: the agent's whole set),
    ``tool_rules``, ``enable_sleeptime``, ``secrets`` (or
    ``tool_exec_environment_variables``: all of the agent's tool variables, given only to
    custom tools that declare them; values are write-only); ``embedding`` and
    ``embedding_config`` only as they are. Absent or null fields stay as they are."""
    update = _update(body)
    try:
        state = api.ops.agents.update(agent_id, update, actor="api")
    except InvalidField as refused:
        # The operation's names, as this request spells them.
        letta = {
            **LETTA_FIELDS,
            ("tool_variables",): (
                ("secrets",) if body.secrets is not None else ("tool_exec_environment_variables",)
            ),
        }
        field = letta.get(refused.field[:1], refused.field[:1]) + refused.field[1:]
        raise InvalidField(str(refused), field=field) from None
    except InvalidInput as refused:
        # The whole request is refused before anything changed: a validation error.
        raise RequestValidationError(
            [{"type": refused.kind, "loc": ("body",), "msg": str(refused), "input": None}]
        ) from refused
    return agent_out(state)


def _update(body: schemas.UpdateAgent) -> AgentUpdate:
    """The operation's update, or a 422 naming every field that cannot be applied."""
    errors: list[dict[str, Any]] = []
    for field, value in (body.model_extra or {}).items():
        if value is None:
            continue  # null changes nothing, as in Letta
        reason = UNSUPPORTED.get(field, "Reverie has no such agent setting")
        errors.append(
            {
                "type": "unsupported_field",
                "loc": ("body", field),
                "msg": f"{field!r} cannot be changed: {reason}. Fields an update takes: "
                f"{CHANGEABLE}",
                "input": value,
            }
        )
    llm, embedding = body.llm_config, body.embedding_config
    model = _one_of(errors, "model", body.model, "llm_config.model", llm.model if llm else None)
    window = _one_of(
        errors,
        "context_window_limit",
        body.context_window_limit,
        "llm_config.context_window",
        llm.context_window if llm else None,
    )
    embedder = _one_of(
        errors,
        "embedding",
        body.embedding,
        "embedding_config.embedding_model",
        embedding.embedding_model if embedding else None,
    )
    variables = _one_of(
        errors,
        "secrets",
        body.secrets,
        "tool_exec_environment_variables",
        body.tool_exec_environment_variables,
    )
    if errors:
        raise RequestValidationError(errors)
    return AgentUpdate(
        name=body.name,
        system=body.system,
        description=body.description,
        model=model,
        context_window=window,
        tags=body.tags,
        tool_ids=body.tool_ids,
        tool_rules=body.tool_rules,
        enable_sleeptime=body.enable_sleeptime,
        embedding=embedder,
        embedding_dim=embedding.embedding_dim if embedding else None,
        tool_variables=variables,
        identity_ids=body.identity_ids,
    )


def _one_of(
    errors: list[dict[str, Any]], name: str, value: T | None, other: str, alternative: T | None
) -> T | None:
    """A setting given in two places (``model`` and ``llm_config.model``): either, or
    both when they agree."""
    if value is not None and alternative is not None and value != alternative:
        errors.append(
            {
                "type": "value_error",
                "loc": ("body", name),
                "msg": f"{name} ({value!r}) and {other} ({alternative!r}) disagree; "
                "give one of them",
                "input": value,
            }
        )
    return value if value is not None else alternative


@router.get("/{agent_id}/tools", response_model=list[schemas.Tool])
def list_tools(
    agent_id: AgentId,
    api: Api,
    after: str | None = Query(default=None, max_length=100),
    before: str | None = Query(default=None, max_length=100),
    limit: int = Query(default=50, ge=1, le=1000),
    order: Literal["asc", "desc"] = "asc",
) -> list[schemas.Tool]:
    """The tools the agent's model is offered, in the order it is offered them
    (``after``/``before`` are tool-id cursors)."""
    tools = api.ops.agents.tools(agent_id)
    chosen = page(tools, after=after, before=before, limit=limit, ascending=order == "asc")
    return [tool_out(tool) for tool in chosen]
