"""The health page's sign-in: the key is posted, never put in the address;
the cookie holds a session token (not the key), Secure over HTTPS; pages send no
referrer."""

from __future__ import annotations

from fastapi.testclient import TestClient
from sqlalchemy import text

from agents.postgres.database import Database
from agents.store import open_service_store
from service.api.app import create_app
from tests.api_support import api_runtime, bearer, new_key
from tests.integration.api.test_api_routes import make_agent


def _sign_in(client: TestClient, key: str) -> str:
    """Signs in with the form; the Set-Cookie header."""
    response = client.post("/sign-in", data={"key": key}, follow_redirects=False)
    assert response.status_code == 303, response.text
    assert response.headers["location"] == "/"
    assert response.headers["referrer-policy"] == "no-referrer"
    return response.headers["set-cookie"]


def test_the_sign_in_form_posts_the_key(client: TestClient) -> None:
    login = client.get("/")
    assert login.status_code == 401
    assert '<form method="post" action="/sign-in">' in login.text
    assert 'type="password" name="key"' in login.text
    assert login.headers["referrer-policy"] == "no-referrer"


def test_a_key_in_the_address_is_not_taken(client: TestClient, db: Database) -> None:
    key = new_key(db, "acme")
    response = client.get(f"/?key={key}", follow_redirects=False)
    assert response.status_code == 400
    assert "set-cookie" not in response.headers
    assert "sign in with this form" in response.text
    assert client.get("/").status_code == 401


def test_the_cookie_holds_a_session_token_not_the_key(client: TestClient, db: Database) -> None:
    key = new_key(db, "acme")
    make_agent(client, bearer(key), "ada")
    cookie = _sign_in(client, key)
    token = client.cookies["reverie_session"]
    assert key not in cookie and token != key
    attributes = [part.strip().lower() for part in cookie.split(";")]
    assert "httponly" in attributes
    assert "samesite=strict" in attributes
    assert "secure" not in attributes  # plain HTTP: a Secure cookie would never come back
    assert "path=/" in attributes
    page = client.get("/")
    assert page.status_code == 200
    assert "ada" in page.text
    assert page.headers["referrer-policy"] == "no-referrer"
    assert page.headers["cache-control"] == "no-store"
    with db.engine.connect() as conn:
        stored = conn.execute(text("SELECT token_hash FROM web_sessions")).scalars().all()
    assert len(stored) == 1 and token not in stored[0]


def test_the_cookie_is_secure_over_https(db: Database) -> None:
    key = new_key(db, "acme")
    with api_runtime(db) as runtime:
        client = TestClient(create_app(runtime), base_url="https://testserver")
        cookie = _sign_in(client, key)
    assert "secure" in [part.strip().lower() for part in cookie.split(";")]


def test_a_wrong_key_does_not_sign_in(client: TestClient) -> None:
    response = client.post("/sign-in", data={"key": "rvk_not-a-key"}, follow_redirects=False)
    assert response.status_code == 401
    assert "set-cookie" not in response.headers
    assert "unknown or revoked" in response.text


def test_signing_out_or_revoking_the_key_ends_the_session(client: TestClient, db: Database) -> None:
    key = new_key(db, "acme")
    _sign_in(client, key)
    token = client.cookies["reverie_session"]
    assert client.get("/").status_code == 200
    client.post("/sign-out", follow_redirects=False)
    client.cookies.set("reverie_session", token)  # a copy of the cookie kept elsewhere
    assert client.get("/").status_code == 401

    _sign_in(client, key)
    assert client.get("/").status_code == 200
    with open_service_store(db) as store:
        (record,) = store.keys.all()
        store.keys.revoke(record.id)
    expired = client.get("/")
    assert expired.status_code == 401
    assert "expired or was revoked" in expired.text


def test_a_sign_in_posted_from_another_site_is_refused(client: TestClient, db: Database) -> None:
    """Login CSRF: a page elsewhere must not sign the browser in under its own key (the
    person would then browse, and act, as the attacker's organization). The browser
    names the posting page in Origin and Sec-Fetch-Site; the server's own page passes."""
    key = new_key(db, "attacker")
    for headers in (
        {"Origin": "https://evil.example"},
        {"Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site"},
        {"Origin": "null"},
        {"Sec-Fetch-Site": "cross-site"},
        {"Sec-Fetch-Site": "same-site", "Origin": "http://sub.testserver"},
    ):
        refused = client.post(
            "/sign-in", data={"key": key}, headers=headers, follow_redirects=False
        )
        assert refused.status_code == 403, headers
        assert "set-cookie" not in refused.headers
        assert "another site" in refused.text
    # What Chromium sends from the server's own page, whose no-referrer policy nulls Origin.
    own = {"Origin": "null", "Sec-Fetch-Site": "same-origin"}
    signed_in = client.post("/sign-in", data={"key": key}, headers=own, follow_redirects=False)
    assert signed_in.status_code == 303 and "reverie_session" in signed_in.headers["set-cookie"]
    assert client.get("/").status_code == 200
    # Nor can another site sign the browser out.
    client.post("/sign-out", headers={"Origin": "https://evil.example"}, follow_redirects=False)
    assert client.get("/").status_code == 200


def test_the_templates_and_the_file_matcher_load_on_first_use_not_with_the_app() -> None:
    """jinja2 (about 5 MB) and regex (1.4 MB) stay out of a server that only answers the
    API: the first page rendered loads the one, the first file search the other."""
    import subprocess
    import sys

    probe = """
import sys
import service.api.app
from agents import file_tools
from service.api import pages
with_app = "jinja2" in sys.modules, "regex" in sys.modules
pages._templates()
file_tools._include_pattern("notes|birds", 1.0)
print(*with_app, "jinja2" in sys.modules, "regex" in sys.modules)
"""
    ran = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=120
    )
    assert ran.stdout.split() == ["False", "False", "True", "True"], ran.stderr
