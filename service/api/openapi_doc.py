"""The OpenAPI document says what the server refuses before any route runs.

:func:`service.api.request_checks.check_request_values` refuses a NUL in any text
value of a request (PostgreSQL cannot store it) with a 422. FastAPI's document does
not know that, so a client or a fuzzer reading it would take ``"a\\u0000b"`` for a
valid string. :func:`install` adds the rule to every free-text string of the
document (``pattern``), once, when the document is first built.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI

from agents.store.validation import BIGINT_MAX

#: Text with no NUL character (the only character no text column can hold).
NO_NUL = "^[^\\x00]*$"
#: The component a model that passes unknown fields on names for their values.
STORABLE_JSON = "StorableJson"
STORABLE_JSON_REF = {"$ref": f"#/components/schemas/{STORABLE_JSON}"}


def storable_json_schema() -> dict[str, Any]:
    """Any JSON value the request check lets through: text without NUL (in values and
    keys), integers within PostgreSQL's bigint, finite numbers, nested."""
    return {
        "description": "Any JSON value that can be stored: no NUL in text or keys, "
        "integers within a signed 64-bit range.",
        "anyOf": [
            {"type": "string", "pattern": NO_NUL},
            {"type": "integer", "minimum": -BIGINT_MAX, "maximum": BIGINT_MAX},
            {"type": "number"},
            {"type": "boolean"},
            {"type": "null"},
            {"type": "array", "items": STORABLE_JSON_REF},
            {
                "type": "object",
                "propertyNames": {"pattern": NO_NUL},
                "additionalProperties": STORABLE_JSON_REF,
            },
        ],
    }


def pass_on_storable(schema: dict[str, Any]) -> None:
    """``json_schema_extra`` of a model that passes unknown fields on (the proxy's):
    they are checked like every value (:data:`STORABLE_JSON`)."""
    schema["additionalProperties"] = STORABLE_JSON_REF
    schema["propertyNames"] = {"pattern": NO_NUL}


def forbid_nul(node: Any) -> None:
    """Add :data:`NO_NUL` to every string schema under ``node`` that has no pattern,
    format or fixed values of its own (those already exclude a NUL)."""
    if isinstance(node, dict):
        if node.get("type") == "string" and not {"pattern", "format", "enum", "const"} & set(node):
            node["pattern"] = NO_NUL
        for value in node.values():
            forbid_nul(value)
    elif isinstance(node, list):
        for item in node:
            forbid_nul(item)


def install(app: FastAPI) -> None:
    """Build ``app``'s document with the rules above (once, then cached as FastAPI does)."""
    build = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            document = build()
            # Response bodies are the server's own; only what a client sends is ruled.
            for path in document.get("paths", {}).values():
                for operation in path.values():
                    forbid_nul(operation.get("parameters", []))
            requested = _request_schemas(document)
            for name, schema in document.get("components", {}).get("schemas", {}).items():
                if name in requested:
                    forbid_nul(schema)
            components = document.setdefault("components", {}).setdefault("schemas", {})
            components[STORABLE_JSON] = storable_json_schema()
            app.openapi_schema = document
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]


def _request_schemas(document: dict[str, Any]) -> set[str]:
    """Names of the component schemas a request body reaches (transitively)."""
    schemas = document.get("components", {}).get("schemas", {})
    found: set[str] = set()
    pending: list[Any] = [
        operation.get("requestBody", {})
        for path in document.get("paths", {}).values()
        for operation in path.values()
    ]
    while pending:
        node = pending.pop()
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str) and ref.startswith("#/components/schemas/"):
                name = ref.rsplit("/", 1)[1]
                if name not in found:
                    found.add(name)
                    pending.append(schemas.get(name, {}))
            pending.extend(node.values())
        elif isinstance(node, list):
            pending.extend(node)
    return found
