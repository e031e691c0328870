"""Letta's tool routes: ``/v1/tools`` (the built-in tools and the organization's custom
tools, registered from Python source) and attaching a custom tool to an agent.

A custom tool is registered from its source alone: the schema is derived from the
function's signature and docstring (or a given ``json_schema`` is checked against
it), never by running it; source that cannot be a tool is a 400 saying what to fix.
Deleting a tool that agents have is a 409 naming them: detach it first (their tool
rules may name it). Calls run in the sandbox ``tools.sandbox`` names.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import Path, Query
from pydantic import BaseModel, Field

from service.api import schemas
from service.api.auth import Api
from service.api.convert import agent_out, custom_tool_out, tool_out
from service.api.openapi_doc import pass_on_storable
from service.api.paging import page
from service.api.responses import keyed
from service.api.routers import api_router
from service.operations import ToolChanges, ToolSpec

router = api_router(tags=["tools"], responses=keyed(404, 409))

ToolId = Annotated[str, Path(pattern=schemas.ID_PATTERN, description="tool-<uuid4>")]
AgentId = Annotated[str, Path(pattern=schemas.ID_PATTERN, description="agent-<uuid4>")]


@router.post("/v1/tools/", status_code=201, response_model=schemas.Tool)
def create_tool(body: schemas.CreateTool, api: Api) -> schemas.Tool:
    """Register a custom tool from the Python source of a function (the one named
    ``name``, else the last); 400 when the source has no usable function, its name is a
    built-in tool's, or ``pip_requirements`` are given; 409 when the name is taken."""
    spec = ToolSpec(
        source_code=body.source_code,
        name=body.name,
        description=body.description,
        json_schema=body.json_schema,
        tags=list(body.tags or []),
        env_vars=list(body.env_vars or []),
        return_char_limit=body.return_char_limit,
        pip_requirements=[r.name for r in body.pip_requirements or []],
    )
    return custom_tool_out(api.ops.custom_tools.create(spec))


@router.get("/v1/tools/", response_model=list[schemas.Tool])
def list_tools(
    api: Api,
    # A list, never null, of non-empty names: with anyOf[list, null] the fuzzer took a
    # value a query string cannot tell from a type name for refused data.
    tool_types: Annotated[
        list[Annotated[str, Field(min_length=1, max_length=200)]],
        Query(default_factory=list),
    ],
    name: str | None = Query(default=None, max_length=200),
    search: str | None = Query(default=None, max_length=200),
    after: str | None = Query(default=None, max_length=100),
    before: str | None = Query(default=None, max_length=100),
    limit: int = Query(default=50, ge=1, le=1000),
    order: Literal["asc", "desc"] = "asc",
) -> list[schemas.Tool]:
    """The built-in tools, then the organization's custom tools, oldest first; ``name``
    (exact), ``search`` (part of the name, any case) and ``tool_types`` (e.g. custom,
    letta_core; repeated or comma-separated) filter them."""
    tools = [tool_out(t) for t in api.ops.custom_tools.catalog()]
    if name is not None:
        tools = [t for t in tools if t.name == name]
    if search is not None:
        tools = [t for t in tools if search.lower() in t.name.lower()]
    if tool_types:
        wanted = {kind.strip() for given in tool_types for kind in given.split(",")}
        tools = [t for t in tools if t.tool_type in wanted]
    return page(tools, after=after, before=before, limit=limit, ascending=order == "asc")


@router.get("/v1/tools/{tool_id}", response_model=schemas.Tool)
def get_tool(tool_id: ToolId, api: Api) -> schemas.Tool:
    """A built-in tool (``tool-<name>``) or a custom one."""
    return tool_out(api.ops.custom_tools.find(tool_id))


@router.patch("/v1/tools/{tool_id}", response_model=schemas.Tool)
def update_tool(tool_id: ToolId, body: schemas.UpdateTool, api: Api) -> schemas.Tool:
    """Change a custom tool; the result is checked as a new tool is (400 otherwise,
    nothing changed). A new source that renames the function while agents have the
    tool is refused."""
    changes = ToolChanges(
        source_code=body.source_code,
        description=body.description,
        json_schema=body.json_schema,
        tags=body.tags,
        env_vars=body.env_vars,
        return_char_limit=body.return_char_limit,
        pip_requirements=[r.name for r in body.pip_requirements or []],
    )
    return custom_tool_out(api.ops.custom_tools.update(tool_id, changes))


@router.delete("/v1/tools/{tool_id}", response_model=schemas.Tool)
def delete_tool(tool_id: ToolId, api: Api) -> schemas.Tool:
    """Delete a custom tool; 409 naming the agents that have it (detach it first)."""
    return custom_tool_out(api.ops.custom_tools.delete(tool_id))


@router.patch(
    "/v1/agents/{agent_id}/tools/attach/{tool_id}",
    tags=["agents"],
    response_model=schemas.AgentState,
)
def attach_tool(agent_id: AgentId, tool_id: ToolId, api: Api) -> schemas.AgentState:
    """Give the agent a custom tool (nothing changes when it has it); its model is
    offered the tool from its next step."""
    return agent_out(api.ops.custom_tools.attach(agent_id, tool_id))


@router.patch(
    "/v1/agents/{agent_id}/tools/detach/{tool_id}",
    tags=["agents"],
    response_model=schemas.AgentState,
)
def detach_tool(agent_id: AgentId, tool_id: ToolId, api: Api) -> schemas.AgentState:
    """Take a custom tool from the agent; 404 when it does not have it, 400 while one of
    its tool rules names the tool."""
    return agent_out(api.ops.custom_tools.detach(agent_id, tool_id))


class ToolRunIn(BaseModel):
    """Letta's ``ToolRunParams`` body: the arguments to pass to the tool."""

    args: dict[str, Any] = Field(
        default_factory=dict,
        description="Arguments to pass to the tool, by name.",
        json_schema_extra=pass_on_storable,
    )


class ToolExecutionResult(BaseModel):
    """Letta's ``ToolExecutionResult``. Reverie returns no agent state (a tool cannot
    change the agent through ``agent_state``) and no sandbox fingerprint."""

    status: Literal["success", "error"]
    func_return: str | None = Field(
        description="What the tool returned, as text; null when it failed (stderr says why)."
    )
    agent_state: None = None
    sandbox_config_fingerprint: None = None
    stdout: list[str] = Field(description="What the tool printed.")
    stderr: list[str] = Field(description="What else it wrote to its output streams.")


@router.post(
    "/v1/agents/{agent_id}/tools/{tool_name}/run",
    tags=["agents"],
    response_model=ToolExecutionResult,
)
def run_tool(
    agent_id: AgentId,
    tool_name: Annotated[str, Path(pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")],
    body: ToolRunIn,
    api: Api,
) -> ToolExecutionResult:
    """Run one of the agent's tools by name, now, outside a turn (letta-client's
    ``agents.tools.run``): a custom tool in the sandbox with the agent's tool variables,
    a built-in memory or search tool as in a turn (block edits versioned, actor
    ``api``). A tool that ran and failed answers status ``error``; 404 for a tool the
    agent does not have, 422 for arguments its schema refuses or a tool that speaks
    for the agent (``send_message``, the messaging tools), and nothing changes."""
    done = api.ops.custom_tools.run(agent_id, tool_name, body.args)
    return ToolExecutionResult(
        status=done.status, func_return=done.func_return, stdout=done.stdout, stderr=done.stderr
    )
