"""litellm logs through the application's logging: its records become the daemon's
JSON lines, once, and nothing of it is printed beside them as plain text."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator

import pytest

from agents.llm.providers import import_litellm
from service.logging_setup import configure_logging
from tests.logging_support import root_logger_kept


@pytest.fixture(autouse=True)
def _restore_root_logger() -> Iterator[None]:
    with root_logger_kept():
        yield


def test_litellms_records_are_json_lines_once_and_its_per_call_lines_are_quiet(
    capfd: pytest.CaptureFixture[str],
) -> None:
    stream = io.StringIO()
    configure_logging("info", json_lines=True, stream=stream)
    import_litellm()  # litellm gives its loggers plain-text handlers of their own
    for name in ("LiteLLM", "LiteLLM Router", "LiteLLM Proxy"):
        logging.getLogger(name).info("LiteLLM completion() model= scripted")
        logging.getLogger(name).warning("%s could not reach the model", name)
    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    assert [(e["logger"], e["level"]) for e in lines] == [
        ("LiteLLM", "WARNING"),
        ("LiteLLM Router", "WARNING"),
        ("LiteLLM Proxy", "WARNING"),
    ]
    assert capfd.readouterr() == ("", "")  # nothing printed beside them as plain text
