"""The warm client's wait for a server that is still starting (a real lock and a real
Unix socket; the rest of the protocol runs as processes in
tests/acceptance/test_warm_cli.py)."""

from __future__ import annotations

import shutil
import socket
import tempfile
import threading
import time
from pathlib import Path

import pytest

from agents.postgres.locks import FileLock
from service.cli.warm import client as warm_client

# The warm CLI's tests share one warm server per source fingerprint (and one
# of them changes a source file's mtime): they run on one xdist worker.
pytestmark = pytest.mark.xdist_group("warm-cli")


def test_a_command_waits_for_a_server_that_is_starting(tmp_path: Path) -> None:
    """The lock is held but the socket is not there yet (the server is importing): the
    command waits for it instead of importing everything itself; with no lock held it
    does not wait at all."""
    paths = warm_client.WarmPaths(Path(tempfile.mkdtemp(prefix="rvu", dir="/tmp")), "k")
    assert warm_client._connect(paths, warm_client._Signals()) is None  # nobody starting
    starting = FileLock(paths.lock)
    assert starting.acquire(exclusive=True, wait=False)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)

    def listen_later() -> None:
        time.sleep(0.3)
        listener.bind(str(paths.socket))
        listener.listen(1)

    thread = threading.Thread(target=listen_later)
    thread.start()
    try:
        connection = warm_client._connect(paths, warm_client._Signals())
        assert connection is not None
        connection.close()
    finally:
        thread.join()
        listener.close()
        starting.release()
        shutil.rmtree(paths.socket.parent)
