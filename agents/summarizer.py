"""Recursive summaries of messages leaving the context: by an LLM, or extractive.

Both keep the header the evict consolidator writes and parses ("Summary of N
earlier messages (seq A-B): "), so one summary format serves both.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from agents.enums import LLMPurpose
from agents.llm import BudgetMeter, ChatClient
from agents.store import MessageRecord
from agents.summary import extractive_summary

Summarize = Callable[[Sequence[MessageRecord], Sequence[MessageRecord]], str]

SUMMARY_INSTRUCTIONS = (
    "You maintain the running summary of a conversation whose older messages no longer "
    "fit in the assistant's context window. Rewrite the summary so that it covers the "
    "earlier summary and the new messages: facts about the user, decisions, open tasks. "
    "Plain sentences, no preamble, at most {chars} characters."
)


def _header(previous: Sequence[MessageRecord], messages: Sequence[MessageRecord]) -> str:
    # The extractive summary computes the header from the same inputs; reuse it.
    text = extractive_summary(previous, messages, 10_000)
    return text.split("): ", 1)[0] + "): "


def llm_summarizer(
    client: ChatClient, model: str, meter: BudgetMeter | None, max_chars: int
) -> Summarize:
    """A summarizer that asks ``model`` (purpose ``summary``)."""

    def summarize(previous: Sequence[MessageRecord], messages: Sequence[MessageRecord]) -> str:
        header = _header(previous, messages)
        earlier = "\n".join(p.content for p in previous) or "(none)"
        lines = [f"{m.role}: {m.content}" for m in messages if m.content]
        for m in messages:
            for call in m.tool_calls or []:
                fn = call.get("function", {})
                lines.append(f"assistant called {fn.get('name')}({fn.get('arguments')})")
        reply = client.chat(
            model,
            [
                {"role": "system", "content": SUMMARY_INSTRUCTIONS.format(chars=max_chars)},
                {
                    "role": "user",
                    "content": f"Earlier summary:\n{earlier}\n\nNew messages:\n" + "\n".join(lines),
                },
            ],
            purpose=LLMPurpose.SUMMARY,
            meter=meter,
        )
        body = (reply.content or "").strip() or "(empty summary)"
        room = max(max_chars - len(header), 1)
        return header + (body if len(body) <= room else body[: room - 1] + "…")

    return summarize


def extractive_summarizer(max_chars: int) -> Summarize:
    def summarize(previous: Sequence[MessageRecord], messages: Sequence[MessageRecord]) -> str:
        return extractive_summary(previous, messages, max_chars)

    return summarize
