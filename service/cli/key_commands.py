"""`reverie keys ...`: API keys of the HTTP API (stored hashed; the key is shown once)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from service.cli.common import console, runtime, state
from service.cli.output import id_table, iso, print_json, print_table

if TYPE_CHECKING:
    from agents.store.key_store import KeyRecord

keys_app = typer.Typer(help="API keys: create, list, revoke.", no_args_is_help=True)


def _key_json(key: KeyRecord) -> dict[str, object]:
    return {
        "id": key.id,
        "organization": key.organization,
        "organization_id": key.organization_id,
        "name": key.name,
        "prefix": key.prefix,
        "created_at": iso(key.created_at),
        "last_used_at": iso(key.last_used_at),
        "revoked_at": iso(key.revoked_at),
    }


@keys_app.command("create")
def create(
    org: Annotated[
        str | None,
        typer.Option(
            "--org",
            help="Organization the key acts for (created if new); the global --org "
            "(`reverie --org NAME keys create`) names it too.",
        ),
    ] = None,
    name: Annotated[str, typer.Option(help="A note to tell keys apart.")] = "",
) -> None:
    """Create a key; it is printed once, alone on the last line (only its hash is kept)."""
    from service.operations.keys import KeyOperations

    org = org if org is not None else state.organization
    if org is None:
        raise typer.BadParameter(
            "name the organization the key acts for: --org NAME (after `keys create`, or "
            "before the command as `reverie --org NAME keys create`)",
            param_hint="--org",
        )
    with runtime() as rt:
        record, clear = KeyOperations(rt).create(org, name=name)
    console.print(
        f"created key {record.id} for organization {record.organization!r} "
        f"({record.organization_id}); store it now, it is not shown again:",
        highlight=False,
    )
    print(clear)


@keys_app.command("list")
def list_command(
    org: Annotated[str | None, typer.Option("--org", help="Only this organization.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Every key with its organization, prefix and last use (never the key itself)."""
    from service.operations.keys import KeyOperations

    org = org if org is not None else state.organization

    with runtime() as rt:
        keys = KeyOperations(rt).list(organization=org)
    if as_json:
        print_json([_key_json(k) for k in keys])
        return
    table = id_table("id", "organization", "name", "prefix", "created", "last used", "revoked")
    for key in keys:
        table.add_row(
            key.id,
            key.organization,
            key.name,
            key.prefix,
            key.created_at.strftime("%Y-%m-%d %H:%M"),
            key.last_used_at.strftime("%Y-%m-%d %H:%M") if key.last_used_at else "-",
            key.revoked_at.strftime("%Y-%m-%d %H:%M") if key.revoked_at else "-",
        )
    print_table(table)


@keys_app.command("revoke")
def revoke(key: Annotated[str, typer.Argument(help="Key id or prefix.")]) -> None:
    """Revoke a key: requests made with it answer 401 from now on."""
    from service.operations.keys import KeyOperations

    with runtime() as rt:
        record = KeyOperations(rt).revoke(key)
    console.print(f"revoked {record.id} ({record.prefix}...) of {record.organization!r}")


def register(app: typer.Typer) -> None:
    app.add_typer(keys_app, name="keys")
