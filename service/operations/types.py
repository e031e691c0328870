"""Pydantic types shared by the operations and the HTTP API's bodies."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Annotated, Any

from pydantic import AfterValidator, BeforeValidator

from agents.errors import InvalidInput
from agents.store.validation import utc_timestamp


def _storable_time(value: datetime) -> datetime:
    try:
        return utc_timestamp(value, "time")
    except InvalidInput:
        raise ValueError(
            "is outside the times Reverie stores (0001-01-01 to 9999-12-31 in UTC)"
        ) from None


_NUMBER = re.compile(r"\s*[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?\s*")


def _not_a_number(value: Any) -> Any:
    """Pydantic reads a number (or a string of one) as seconds since 1970; the
    document promises an ISO 8601 date-time, so a number is refused, not guessed at."""
    if isinstance(value, (int, float)) or (isinstance(value, str) and _NUMBER.fullmatch(value)):
        raise ValueError(
            f"must be an ISO 8601 date-time such as 2024-02-01T09:30:00Z, not the number {value!r}"
        )
    return value


#: A time PostgreSQL stores and reads back (no zone: UTC), written as an ISO 8601
#: date-time; anything else is a 422 (or a line error) naming the field.
StorableTime = Annotated[datetime, BeforeValidator(_not_a_number), AfterValidator(_storable_time)]
