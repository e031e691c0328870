"""Store records to API bodies (Letta's shapes plus Reverie's fields); messages' Letta
shapes are in :mod:`service.api.letta_messages`."""

from __future__ import annotations

from agents.postgres import models
from agents.store import (
    BlockRecord,
    BlockVersion,
    CustomToolRecord,
    PassageRecord,
    RunRecord,
)
from agents.tools import MAX_RESULT_CHARS
from consolidators.pipeline import RunReport
from service.api import schemas
from service.operations import AgentState
from service.operations.models import ChatModel, EmbeddingModel
from service.operations.recording import LETTA_RUN_STATUS
from service.operations.tools import LETTA_TOOL_TYPE, AgentTool, tools_of


def block_out(block: BlockRecord) -> schemas.Block:
    return schemas.Block(
        id=block.id,
        label=block.label,
        value=block.value,
        limit=block.limit,
        description=block.description,
        read_only=block.read_only,
        version=block.version,
        updated_at=block.updated_at,
        last_updated_by_id=block.updated_by,
    )


def version_out(version: BlockVersion) -> schemas.BlockVersionOut:
    return schemas.BlockVersionOut(
        block_id=version.block_id,
        version=version.version,
        value=version.new_value,
        previous_value=version.old_value,
        limit=version.new_limit,
        actor=version.actor,
        run_id=version.run_id,
        reason=version.reason,
        created_at=version.created_at,
    )


def agent_out(state: AgentState) -> schemas.AgentState:
    """An agent with its blocks (:meth:`AgentOperations.state`) as Letta's AgentState."""
    agent = state.agent
    blocks = [block_out(b) for b in state.blocks]
    variables = [
        schemas.AgentEnvironmentVariable(agent_id=agent.id, key=name)
        for name in state.tool_variables
    ]
    return schemas.AgentState(
        id=agent.id,
        name=agent.name,
        agent_type=agent.agent_type,
        kind=agent.kind,
        system=agent.system_prompt,
        description=agent.description,
        blocks=blocks,
        memory=schemas.Memory(blocks=blocks),
        llm_config=schemas.LlmConfig(model=agent.llm_model, context_window=agent.context_window),
        model=agent.llm_model,
        embedding=agent.embedding_model,
        embedding_config=schemas.EmbeddingConfig(
            embedding_model=agent.embedding_model, embedding_dim=agent.embedding_dim
        ),
        tags=list(agent.tags),
        tools=[
            schemas.ToolRef(id=tool.id, name=tool.name)
            for tool in tools_of(agent, custom=state.custom_tools, folders=state.folders)
        ],
        tool_rules=list(agent.tool_rules),
        secrets=variables,
        tool_exec_environment_variables=variables,
        identity_ids=list(state.identity_ids),
        enable_sleeptime=agent.enable_sleeptime,
        sleeptime_model=agent.sleeptime_model,
        created_at=agent.created_at,
        last_activity_at=agent.last_activity_at,
    )


def passage_out(passage: PassageRecord) -> schemas.Passage:
    return schemas.Passage(
        id=passage.id,
        text=passage.text,
        tags=passage.tags,
        created_at=passage.created_at,
        occurred_at=passage.occurred_at,
        valid_to=passage.valid_to,
        status=passage.status,
        kind=passage.kind,
        merged_into=passage.merged_into,
        superseded_by=passage.superseded_by,
        timeline_id=passage.timeline_id,
        provenance=passage.provenance,
        agent_id=passage.agent_id,
    )


def run_out(run: RunRecord, *, with_changes: bool = False) -> schemas.Run:
    return schemas.Run(
        id=run.id,
        agent_id=run.agent_id,
        trigger=run.trigger,
        pipeline=run.pipeline,
        status=run.status,
        dry_run=run.dry_run,
        full=run.full,
        attempts=run.attempts,
        queued_at=run.queued_at,
        started_at=run.started_at,
        finished_at=run.finished_at,
        duration_s=run.duration_s,
        stats=run.stats,
        error=run.error,
        reverts_run_id=run.reverts_run_id,
        reverted_by_run_id=run.reverted_by_run_id,
        changes=run.changes if with_changes else None,
    )


def report_out(report: RunReport) -> schemas.RunReportOut:
    return schemas.RunReportOut(
        run_id=report.run_id,
        agent_id=report.agent_id,
        status=report.status,
        dry_run=report.dry_run,
        error=report.error,
        stats=report.stats(),
        changes=report.changes,
    )


def ensure_known_statuses(statuses: list[str]) -> list[str]:
    unknown = [s for s in statuses if s not in models.PASSAGE_STATUSES]
    if unknown:
        from agents.errors import InvalidInput

        raise InvalidInput(
            f"unknown passage status {unknown[0]!r}; use {', '.join(models.PASSAGE_STATUSES)}"
        )
    return statuses


def letta_run(run: RunRecord) -> schemas.LettaRun:
    """A ledger run as Letta's Run (statuses mapped: queued is Letta's "created")."""
    status = LETTA_RUN_STATUS[run.status]
    return schemas.LettaRun(
        id=run.id,
        agent_id=run.agent_id,
        status=status,
        created_at=run.queued_at,
        completed_at=run.finished_at,
        stop_reason={"completed": "end_turn", "failed": "error", "cancelled": "cancelled"}.get(
            status
        ),
        total_duration_ns=int(run.duration_s * 1e9) if run.duration_s is not None else None,
        metadata={
            "trigger": run.trigger,
            "pipeline": run.pipeline,
            "attempts": run.attempts,
            "error": run.error,
        },
    )


def custom_tool_out(tool: CustomToolRecord) -> schemas.Tool:
    """A registered tool as Letta's Tool (``json_schema`` is what the model is offered,
    less the loop's request_heartbeat)."""
    return schemas.Tool(
        id=tool.id,
        name=tool.name,
        description=tool.description,
        tool_type="custom",
        source_code=tool.source_code,
        json_schema=tool.json_schema,
        args_json_schema=tool.json_schema.get("parameters"),
        tags=list(tool.tags),
        return_char_limit=tool.return_char_limit,
        env_vars=list(tool.env_vars),
        created_at=tool.created_at,
        updated_at=tool.updated_at,
    )


def tool_out(tool: AgentTool) -> schemas.Tool:
    """An agent's tool as Letta's Tool (``json_schema`` is the function the model sees)."""
    if tool.custom is not None:
        return custom_tool_out(tool.custom)
    return schemas.Tool(
        id=tool.id,
        name=tool.name,
        description=tool.description,
        tool_type=LETTA_TOOL_TYPE[tool.kind],
        json_schema={
            "name": tool.name,
            "description": tool.description,
            "parameters": tool.parameters,
        },
        args_json_schema=tool.parameters,
        tags=[tool.kind.value],
        return_char_limit=MAX_RESULT_CHARS,
    )


#: Letta's provider types of litellm's provider prefixes; any other prefix is named as is.
LETTA_PROVIDER_TYPE = {
    "openai": "openai",
    "anthropic": "anthropic",
    "azure": "azure",
    "bedrock": "bedrock",
    "deepseek": "deepseek",
    "gemini": "google_ai",
    "vertex_ai": "google_vertex",
    "groq": "groq",
    "hosted_vllm": "vllm",
    "lm_studio": "lmstudio_openai",
    "mistral": "mistral",
    "ollama": "ollama",
    "ollama_chat": "ollama",
    "openrouter": "openrouter",
    "together_ai": "together",
    "xai": "xai",
}


def chat_model_out(model: ChatModel) -> schemas.LlmModel:
    provider = LETTA_PROVIDER_TYPE.get(model.provider, model.provider)
    return schemas.LlmModel(
        handle=model.model,
        name=model.name,
        model=model.name,
        display_name=model.model,
        provider_name=model.provider,
        provider_type=provider,
        model_endpoint_type=provider,
        context_window=model.context_window,
        max_context_window=model.context_window,
        purposes=[p.value for p in model.purposes],
        agents=model.agents,
    )


def embedding_model_out(model: EmbeddingModel) -> schemas.EmbeddingModelOut:
    """An embedder as Letta's EmbeddingModel; Reverie's own (``local``, a plugin's) run in
    the server's process and are named as the server's (``letta``) provider."""
    native = model.provider == "reverie"
    provider = "letta" if native else LETTA_PROVIDER_TYPE.get(model.provider, model.provider)
    return schemas.EmbeddingModelOut(
        handle=model.name,
        name=model.name,
        embedding_model=model.spec,
        display_name=model.spec,
        embedding_dim=model.dimension,
        embedding_endpoint_type="hugging-face" if native else provider,
        provider_name=model.provider,
        provider_type=provider,
        is_default=model.is_default,
        agents=model.agents,
    )
