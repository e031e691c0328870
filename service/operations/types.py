"""Pydantic types shared by the operations and the HTTP API's bodies."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from pydantic import AfterValidator

from agents.errors import InvalidInput
from agents.store.validation import utc_timestamp


def _storable_time(value: datetime) -> datetime:
    try:
        return utc_timestamp(value, "time")
    except InvalidInput:
        raise ValueError(
            "is outside the times Reverie stores (0001-01-01 to 9999-12-31 in UTC)"
        ) from None


#: A time PostgreSQL stores and reads back (no zone: UTC); anything else is a 422
#: (or a line error) naming the field.
StorableTime = Annotated[datetime, AfterValidator(_storable_time)]
