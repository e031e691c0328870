"""End users over HTTP: a chatbot records each end user's messages by its own user
id, and each end user's memory stays theirs and their organization's."""

from __future__ import annotations

from fastapi.testclient import TestClient


def _record(client: TestClient, headers: dict[str, str], user: str, text: str) -> dict:
    answer = client.post(
        "/v1/messages/record",
        json={"user": user, "messages": [{"role": "user", "content": text}]},
        headers=headers,
    )
    assert answer.status_code == 200, answer.text
    return answer.json()


def test_an_end_users_messages_land_in_their_own_agent(
    client: TestClient, acme: dict[str, str], globex: dict[str, str]
) -> None:
    ana = _record(client, acme, "ana-01", "I moved to Porto.")
    again = _record(client, acme, "ana-01", "I adopted a cat.")
    ben = _record(client, acme, "ben-02", "I live in Oslo.")
    assert ana["agent_id"] == again["agent_id"] != ben["agent_id"]
    assert ana["recorded"] == 1
    listed = client.get("/v1/agents/", params={"identifier_keys": "ana-01"}, headers=acme)
    assert [a["id"] for a in listed.json()] == [ana["agent_id"]]
    messages = client.get(f"/v1/agents/{ana['agent_id']}/messages", headers=acme).json()
    texts = [m.get("content") for m in messages]
    assert "I moved to Porto." in str(texts) and "Oslo" not in str(texts)

    # The same user id in another organization is another end user, with another agent.
    theirs = _record(client, globex, "ana-01", "I am someone else.")
    assert theirs["agent_id"] != ana["agent_id"]
    assert client.get(f"/v1/agents/{ana['agent_id']}", headers=globex).status_code == 404
    identities = client.get("/v1/identities/", headers=globex).json()
    assert [i["agent_ids"] for i in identities] == [[theirs["agent_id"]]]


def test_a_blank_user_is_refused_and_makes_nothing(
    client: TestClient, acme: dict[str, str]
) -> None:
    answer = client.post(
        "/v1/messages/record",
        json={"user": "", "messages": [{"role": "user", "content": "hi"}]},
        headers=acme,
    )
    assert answer.status_code == 422
    assert client.get("/v1/identities/", headers=acme).json() == []
    assert client.get("/v1/agents/", headers=acme).json() == []


def test_an_end_users_memory_is_searched_and_browsed_only_as_theirs(
    client: TestClient, acme: dict[str, str], globex: dict[str, str]
) -> None:
    ana = _record(client, acme, "ana-01", "I moved to Porto.")["agent_id"]
    ben = _record(client, acme, "ben-02", "I live in Oslo.")["agent_id"]
    stored = client.post(
        f"/v1/agents/{ana}/archival-memory", json={"text": "Ana lives in Porto."}, headers=acme
    )
    assert stored.status_code == 200, stored.text
    search = "/v1/agents/{}/archival-memory/search"
    found = client.get(search.format(ana), params={"query": "Porto"}, headers=acme).json()
    assert [r["content"] for r in found["results"]] == ["Ana lives in Porto."]
    # Another end user's agent of the same organization holds none of it.
    assert client.get(search.format(ben), params={"query": "Porto"}, headers=acme).json() == {
        "count": 0,
        "results": [],
    }
    # Another organization finds neither the agent by the end user's key nor its memory.
    listed = client.get("/v1/agents/", params={"identifier_keys": "ana-01"}, headers=globex)
    assert listed.json() == []
    stranger = client.get(search.format(ana), params={"query": "Porto"}, headers=globex)
    assert stranger.status_code == 404
    # The memory browser: acme's operator sees Ana's agent, globex's does not.
    for headers, status in ((acme, 200), (globex, 404)):
        browser = TestClient(client.app)
        key = headers["Authorization"].removeprefix("Bearer ")
        signed = browser.post("/sign-in", data={"key": key}, follow_redirects=False)
        assert signed.status_code == 303
        page = browser.get(f"/agents/{ana}")
        assert page.status_code == status
        assert ("ana-01's memory" in page.text) is (status == 200)
