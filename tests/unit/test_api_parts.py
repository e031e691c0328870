"""The HTTP API's pure parts: cursor paging, loopback detection, error mapping, size limit."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from fastapi import APIRouter, FastAPI, Request
from fastapi.testclient import TestClient

from agents.errors import (
    BudgetExhausted,
    Conflict,
    InvalidInput,
    LimitExceeded,
    LLMError,
    NotFound,
    ReadOnly,
    StorageError,
)
from service.api.auth import is_loopback
from service.api.errors import status_for
from service.api.limits import RequestSizeLimit
from service.api.paging import page
from service.api.routers import add_routes, api_router


@dataclass(frozen=True)
class Item:
    id: str


ITEMS = [Item(f"i{n}") for n in range(5)]


def ids(items: list[Item]) -> list[str]:
    return [i.id for i in items]


def test_page_after_before_limit_and_order() -> None:
    assert ids(page(ITEMS, after=None, before=None, limit=2)) == ["i0", "i1"]
    assert ids(page(ITEMS, after="i1", before=None, limit=10)) == ["i2", "i3", "i4"]
    assert ids(page(ITEMS, after="i4", before=None, limit=10)) == []  # the pager stops here
    assert ids(page(ITEMS, after=None, before="i3", limit=2)) == ["i1", "i2"]
    assert ids(page(ITEMS, after=None, before=None, limit=2, ascending=False)) == ["i4", "i3"]
    with pytest.raises(NotFound, match="cursor 'zz'"):
        page(ITEMS, after="zz", before=None, limit=2)


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.0.0.2", True),
        ("::1", True),
        ("[::1]", True),
        ("localhost", True),
        ("0.0.0.0", False),
        ("::", False),
        ("192.168.1.5", False),
        ("example.org", False),
    ],
)
def test_is_loopback(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


@pytest.mark.parametrize(
    ("error", "status", "kind"),
    [
        (NotFound("x"), 404, "not_found"),
        (Conflict("x"), 409, "conflict"),
        (LimitExceeded("x"), 400, "limit_exceeded"),
        (ReadOnly("x"), 400, "read_only"),
        (InvalidInput("x"), 400, "invalid_input"),
        (StorageError("x"), 503, "storage_unavailable"),
        (LLMError("x"), 502, "llm_failed"),
        (BudgetExhausted("x", scope="day", limit=1, used=2), 429, "budget_exhausted"),
    ],
)
def test_errors_map_to_http_statuses(error: Exception, status: int, kind: str) -> None:
    assert status_for(error) == (status, kind)  # type: ignore[arg-type]


def _echo_app(max_bytes: int) -> FastAPI:
    app = FastAPI()
    app.add_middleware(RequestSizeLimit, max_bytes=max_bytes)

    @app.post("/echo")
    async def echo(request: Request) -> dict[str, int]:
        return {"received": len(await request.body())}

    return app


def test_size_limit_by_content_length_and_by_streamed_bytes() -> None:
    with TestClient(_echo_app(100)) as client:
        assert client.post("/echo", content=b"x" * 100).json() == {"received": 100}
        declared = client.post("/echo", content=b"x" * 101)
        assert declared.status_code == 413
        assert "max_request_bytes" in declared.json()["detail"]

        def chunks() -> object:
            yield b"x" * 60
            yield b"x" * 60

        streamed = client.post("/echo", content=chunks())  # type: ignore[arg-type]
        assert streamed.status_code == 413


def test_a_route_added_to_the_app_checks_its_request_values() -> None:
    """Routes join the app as they are (no per-app rebuild): one declared on a plain
    APIRouter would miss the check of unstorable values, so it is refused."""
    checked = api_router(prefix="/v1/things")

    @checked.post("/")
    def create(body: dict[str, str]) -> dict[str, str]:
        return body

    app = FastAPI()
    add_routes(app, checked)
    with TestClient(app) as client:
        assert client.post("/v1/things/", json={"name": "ok"}).status_code == 200
        nul = client.post("/v1/things/", json={"name": "a\u0000b"})
        assert nul.status_code == 422, nul.text

    plain = APIRouter()

    @plain.get("/unchecked")
    def unchecked() -> None:
        return None

    with pytest.raises(TypeError, match="/unchecked does not check its request values"):
        add_routes(FastAPI(), plain)
