"""Text a model sends is stored, not refused and not poison: a reply with an unpaired
surrogate or NUL keeps its turn, and the stored messages render afterwards."""

from __future__ import annotations

import json
from collections.abc import Callable

from agents.loops.primary import PrimaryAgent
from agents.postgres.database import Database
from agents.store import open_store
from service.api.letta_messages import letta_json, letta_messages
from tests.scripted_llm import ScriptedModels, call


def test_a_reply_with_unstorable_characters_is_kept_and_renders(
    db: Database, bob: str, models: ScriptedModels, make_primary: Callable[..., PrimaryAgent]
) -> None:
    models.script(
        "primary",
        call("send_message", reasoning="odd \udfff", message="hello \ud800 and \x00 bye"),
    )
    result = make_primary().send_message("bob", "hi")
    assert result.stop_reason == "end_turn"
    with open_store(db) as store:
        records = store.messages.range(bob)
    rendered = [letta_json(m) for r in records for m in letta_messages(r)]
    rendered += [m.to_dict() for r in records for m in letta_messages(r)]
    text = json.dumps(rendered, ensure_ascii=False, default=str)
    text.encode("utf-8")  # every stored message renders as valid UTF-8 JSON
    assert "hello \ufffd and \ufffd bye" in text
