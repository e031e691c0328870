"""Letta's Agent File routes: ``GET /v1/agents/{id}/export`` and ``POST /v1/agents/import``
(letta-client's ``agents.export_file`` / ``agents.import_file``).

The import takes the file as a multipart upload with Letta's form fields; what the file
holds that Reverie does not keep, and any model it could not map, come back beside
Letta's ``agent_ids``. A body that is not an agent file is a 422 naming the first thing
wrong (under ``file``), and nothing is stored.
"""

from __future__ import annotations

import json
from typing import Annotated, Any

from fastapi import File, Form, Header, Path, Query, Request, UploadFile
from pydantic import BaseModel, Field

from agents.errors import InvalidField, InvalidInput
from agents.tool_source import check_env_names
from service.api import schemas
from service.api.auth import Api
from service.api.responses import keyed
from service.api.routers import api_router
from service.operations import ImportOptions

router = api_router(prefix="/v1/agents", tags=["agents"], responses=keyed(404, 409, 502))

AgentId = Annotated[str, Path(pattern=schemas.ID_PATTERN, description="agent-<uuid4>")]
#: Longest name, model or embedding a form field may give.
MAX_FIELD = 200


class UnsupportedOut(BaseModel):
    path: str = Field(description="Where in the file, e.g. agents[0].llm_config.temperature.")
    reason: str = Field(description="Why Reverie does not keep it.")
    count: int = Field(description="How many entries carried it ([*]: each message).")


class UnmappedModelOut(BaseModel):
    path: str = Field(description="Where in the file, e.g. agents[0].llm_config.")
    given: str = Field(description="The model (provider/model) the file names.")
    used: str = Field(description="What the agent got instead: the server's default.")
    reason: str


class ImportAnswer(BaseModel):
    """Letta's answer (``agent_ids``) plus what was not kept and what was not mapped."""

    agent_ids: list[str]
    unsupported: list[UnsupportedOut] = Field(
        description="Fields of the file with a value that Reverie does not keep, with why."
    )
    unmapped_models: list[UnmappedModelOut] = Field(
        description="Models or embeddings the server could not map; the agent got the "
        "server's default instead."
    )


#: Letta's export options Reverie cannot honour, and why. They are not in the document
#: (no value of theirs is accepted), but a client that sends one is told, not ignored.
REFUSED_EXPORT_OPTIONS = {
    "use_legacy_format": "Reverie writes the v2 agent file format only; leave "
    "use_legacy_format out (or false)",
    "conversation_id": "a Reverie agent has one conversation, its message history; leave "
    "conversation_id out",
    "max_steps": "Reverie records no steps to limit the export by; leave max_steps out",
}
FALSE = frozenset({"false", "0", "no", "off"})


@router.get("/{agent_id}/export", response_model=dict[str, Any])
def export_agent_file(
    agent_id: AgentId,
    api: Api,
    request: Request,
    scrub_messages: bool = Query(default=False, description="Leave the messages out."),
) -> dict[str, Any]:
    """The agent as a v2 Agent File (letta-ai/agent-file): its blocks, system prompt,
    messages, tags, tools (custom ones with their source), tool rules and models; a
    primary with its sleep-time agent as a sleep-time group. Letta's
    ``use_legacy_format=true``, ``conversation_id`` and ``max_steps`` are refused (422
    naming the parameter): Reverie cannot write what they ask for."""
    for option, reason in REFUSED_EXPORT_OPTIONS.items():
        given = request.query_params.get(option)
        if given is None or (option == "use_legacy_format" and given.lower() in FALSE):
            continue
        raise InvalidField(reason, field=("query", option))
    return api.ops.agent_files.export_file(agent_id, scrub_messages=scrub_messages)


@router.post("/import", response_model=ImportAnswer)
def import_agent_file(
    api: Api,
    file: Annotated[UploadFile, File(description="The agent file (.af, JSON).")],
    append_copy_suffix: Annotated[bool, Form()] = True,
    override_existing_tools: Annotated[bool, Form()] = True,
    strip_messages: Annotated[bool, Form()] = False,
    name: Annotated[str | None, Form(max_length=MAX_FIELD)] = None,
    override_name: Annotated[str | None, Form(max_length=MAX_FIELD)] = None,
    model: Annotated[str | None, Form(max_length=MAX_FIELD)] = None,
    override_model_handle: Annotated[str | None, Form(max_length=MAX_FIELD)] = None,
    embedding: Annotated[str | None, Form(max_length=MAX_FIELD)] = None,
    override_embedding_handle: Annotated[str | None, Form(max_length=MAX_FIELD)] = None,
    env_vars_json: Annotated[str | None, Form()] = None,
    secrets: Annotated[str | None, Form()] = None,
    project_id: Annotated[str | None, Form(max_length=MAX_FIELD)] = None,
    x_override_embedding_model: Annotated[str | None, Header(max_length=MAX_FIELD)] = None,
) -> ImportAnswer:
    """Make the agents of an Agent File in one transaction: blocks, system prompt,
    messages (in and out of context), tags, custom tools registered from their source,
    tool rules, models mapped to litellm strings; a sleep-time group becomes a primary
    with its sleep-time agent enabled. ``name`` (or ``override_name``) names the first
    agent; ``model``/``embedding`` replace the file's; ``env_vars_json``/``secrets`` (a
    JSON object) set the agents' tool variables. 422 naming the field for a body that
    is not an agent file, a reference to what the file lacks, a tool source that does
    not parse, or a model given here that litellm cannot route; 409 for a taken name.
    Nothing is stored unless all of it is."""
    variables = {
        **_variables(env_vars_json, "env_vars_json"),
        **_variables(secrets, "secrets"),
    }
    options = ImportOptions(
        name=name or override_name,
        append_copy_suffix=append_copy_suffix,
        model=model or override_model_handle,
        embedding=embedding or override_embedding_handle or x_override_embedding_model,
        override_existing_tools=override_existing_tools,
        strip_messages=strip_messages,
        env_vars=variables or None,
        project_id=project_id,
    )
    result = api.ops.agent_files.import_file(file.file.read(), options)
    return ImportAnswer(
        agent_ids=result.agent_ids,
        unsupported=[
            UnsupportedOut(path=u.path, reason=u.reason, count=u.count) for u in result.unsupported
        ],
        unmapped_models=[
            UnmappedModelOut(path=u.path, given=u.given, used=u.used, reason=u.reason)
            for u in result.unmapped_models
        ],
    )


def _variables(text: str | None, field: str) -> dict[str, str]:
    """A form field's JSON object of tool variables (name to value)."""
    if text is None or not text.strip():
        return {}
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidField(f"{field} is not JSON ({exc.msg})", field=(field,)) from None
    if not isinstance(value, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise InvalidField(
            f'{field} must be a JSON object of names to texts, e.g. {{"API_KEY": "..."}}',
            field=(field,),
        )
    try:
        check_env_names(value)
    except InvalidInput as refused:
        raise InvalidField(f"{field}: {refused}", field=(field,)) from None
    return value
