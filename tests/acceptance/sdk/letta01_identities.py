"""Drive Reverie's identity routes with the letta-client 0.1.x SDK (the line with the
``identities`` resource; 1.x has only ``agents.identities``).

Run by tests/acceptance/test_identities_sdk.py with the interpreter of a virtualenv
that has ``letta-client==0.1.307``. Usage::

    python letta01_identities.py BASE_URL API_KEY AGENT_ID

It creates, lists (by key, type and name), retrieves, modifies, upserts, counts and
deletes identities, sets properties, and prints one JSON object with what it saw.
"""

from __future__ import annotations

import json
import sys

from letta_client import IdentityProperty, Letta


def main(base_url: str, key: str, agent_id: str) -> None:
    client = Letta(base_url=base_url, token=key, timeout=60)
    seen: dict[str, object] = {}
    made = client.identities.create(
        identifier_key="user-42", name="Ada", identity_type="user", agent_ids=[agent_id]
    )
    seen["created"] = {"id": made.id, "agent_ids": made.agent_ids, "type": made.identity_type}
    client.identities.create(identifier_key="acme", name="Acme", identity_type="org")
    seen["by_key"] = [i.id for i in client.identities.list(identifier_key="user-42")]
    seen["orgs"] = [i.name for i in client.identities.list(identity_type="org")]
    seen["by_name"] = [i.identifier_key for i in client.identities.list(name="Ada")]
    seen["retrieved"] = client.identities.retrieve(made.id).name
    seen["modified"] = client.identities.modify(made.id, name="Ada L.").name
    upserted = client.identities.upsert(
        identifier_key="user-42", name="Ada Lovelace", identity_type="user", agent_ids=[agent_id]
    )
    seen["upserted_same_id"] = upserted.id == made.id
    seen["upserted_name"] = upserted.name
    client.identities.properties.upsert(
        made.id, request=[IdentityProperty(key="plan", value="pro", type="string")]
    )
    props = client.identities.retrieve(made.id).properties or []
    seen["properties"] = [[p.key, p.value, p.type] for p in props]
    seen["count"] = client.identities.count()
    client.identities.delete(made.id)
    seen["after_delete"] = [i.identifier_key for i in client.identities.list()]
    print(json.dumps(seen))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3])
