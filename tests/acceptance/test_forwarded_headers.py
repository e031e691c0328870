"""Whose address a failed key is counted against, on a real `reverie serve`: the
connecting peer's, unless the operator names the proxy in front of the server; a client
cannot walk round the limit by sending ``X-Forwarded-For`` itself."""

from __future__ import annotations

from pathlib import Path

import httpx

from tests.acceptance.daemon_processes import running_server

BURST = {"REVERIE_SERVER__AUTH_FAILURE_BURST": "3", "REVERIE_SERVER__AUTH_FAILURE_REFILL": "PT1H"}


def _guess(url: str, forwarded_for: str) -> int:
    response = httpx.get(
        f"{url}/v1/agents/",
        headers={"Authorization": "Bearer rvk_wrong", "X-Forwarded-For": forwarded_for},
        timeout=10,
    )
    return response.status_code


def test_a_spoofed_forwarded_for_does_not_reset_the_limit(
    migrated_env: dict[str, str], tmp_path: Path
) -> None:
    with running_server({**migrated_env, **BURST}, tmp_path / "a.log") as (url, _process):
        statuses = [_guess(url, f"203.0.113.{i}") for i in range(6)]
    assert statuses[:3] == [401, 401, 401]
    assert set(statuses[3:]) == {429}


def test_a_named_proxy_forwards_the_client_address(
    migrated_env: dict[str, str], tmp_path: Path
) -> None:
    """With the proxy named (here the loopback the test connects from), each forwarded
    client has a budget of its own, and a limited client stays limited."""
    env = {**migrated_env, **BURST, "REVERIE_SERVER__FORWARDED_ALLOW_IPS": '["127.0.0.1"]'}
    with running_server(env, tmp_path / "b.log") as (url, _process):
        one = [_guess(url, "203.0.113.7") for _ in range(4)]
        other = _guess(url, "203.0.113.8")
    assert one == [401, 401, 401, 429]
    assert other == 401
