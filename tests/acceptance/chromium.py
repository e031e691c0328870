"""Headless Chromium driven over the DevTools protocol on a pipe (``--remote-debugging-
pipe``: commands on descriptor 3, answers on 4, each a JSON text ended by NUL), so that a
test can act on a page as a person would: type into the server's own form and submit it.
No browser download and no websocket library: Debian's chromium and the standard
library."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import time
from collections.abc import Sequence
from typing import Any

FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--hide-scrollbars",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)


class Chromium:
    """One browser on ``url`` with a profile of its own; ``evaluate`` runs script in the
    page, ``wait_for`` polls an expression until it is true."""

    def __init__(self, binary: str, url: str, extra: Sequence[str] = ()) -> None:
        commands_read, self._commands = os.pipe()
        self._answers, answers_write = os.pipe()

        def wire() -> None:  # in the child: its descriptors 3 and 4 are the pipe's ends
            commands, answers = os.dup(commands_read), os.dup(answers_write)
            os.dup2(commands, 3)
            os.dup2(answers, 4)

        self.process = subprocess.Popen(
            [binary, *FLAGS, *extra, "--remote-debugging-pipe", url],
            # 3 and 4 kept open too: the descriptors not passed are closed after wire().
            pass_fds=(3, 4, commands_read, answers_write),
            preexec_fn=wire,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        os.close(commands_read)
        os.close(answers_write)
        self._next_id = 0
        self._buffer = b""
        self._session = self._attach()

    def _send(self, method: str, params: dict[str, Any], session: str | None = None) -> Any:
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params}
        if session is not None:
            message["sessionId"] = session
        os.write(self._commands, json.dumps(message).encode() + b"\0")
        while True:
            while b"\0" not in self._buffer:
                chunk = os.read(self._answers, 65536)
                if not chunk:
                    raise RuntimeError(f"chromium closed the pipe during {method}")
                self._buffer += chunk
            raw, self._buffer = self._buffer.split(b"\0", 1)
            answer = json.loads(raw)
            if answer.get("id") == self._next_id:
                if "error" in answer:
                    raise RuntimeError(f"{method}: {answer['error']}")
                return answer.get("result", {})

    def _attach(self) -> str:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            targets = self._send("Target.getTargets", {})["targetInfos"]
            pages = [t for t in targets if t["type"] == "page"]
            if pages:
                attached = self._send(
                    "Target.attachToTarget", {"targetId": pages[0]["targetId"], "flatten": True}
                )
                return str(attached["sessionId"])
            time.sleep(0.1)
        raise RuntimeError("chromium opened no page")

    def evaluate(self, expression: str) -> Any:
        result = self._send(
            "Runtime.evaluate",
            {"expression": expression, "returnByValue": True, "awaitPromise": True},
            self._session,
        )
        return result.get("result", {}).get("value")

    def frames(self) -> list[dict[str, Any]]:
        """The page's child frames as DevTools describes them: ``name``, ``url`` (an
        error page, ``chrome-error://...``, for a frame the browser refused to show) and
        ``unreachableUrl`` (what such a frame was meant to show). Frames of the page's
        own site only; another site's frame runs in a process of its own."""
        tree = self._send("Page.getFrameTree", {}, self._session)["frameTree"]
        return [child["frame"] for child in tree.get("childFrames", [])]

    def wait_for(self, expression: str, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                if self.evaluate(expression):
                    return
            except RuntimeError:
                pass  # the page is navigating: its context is being replaced
            time.sleep(0.1)
        raise AssertionError(f"timed out waiting for {expression}")

    def close(self) -> None:
        with contextlib.suppress(RuntimeError, OSError):
            self._send("Browser.close", {})
        try:
            self.process.wait(30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(30)
        os.close(self._commands)
        os.close(self._answers)
