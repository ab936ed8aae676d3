"""The envelope every answer comes in, the rules of a request body and a result, a moment."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any, Generic, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, Strict

from memvault.errors import InvalidInputError

T = TypeVar("T")


# A point in time: ISO 8601 text, or Unix time in seconds (milliseconds above 1e11).
Moment = Annotated[datetime, Strict(False)] | float
_MILLISECONDS = 1e11


def moment(value: datetime | float) -> datetime:
    """The datetime a :data:`Moment` names."""
    if isinstance(value, datetime):
        return value
    seconds = value / 1000 if abs(value) > _MILLISECONDS else value
    try:
        return datetime.fromtimestamp(seconds, UTC)
    except (OverflowError, OSError, ValueError) as exc:
        raise InvalidInputError(f"{value} is not a Unix time.") from exc


class Body(BaseModel):
    """A request body: unknown fields are mistakes, reported rather than ignored.

    Strict: a JSON value must have the type the spec names (no "0.5" for a
    number, no 1 for a boolean); timestamps are the exception, parsed from text.
    """

    model_config = ConfigDict(extra="forbid", strict=True)


class Result(BaseModel):
    """A result object: the listed fields, and possibly more."""

    model_config = ConfigDict(extra="allow")


class Envelope(BaseModel, Generic[T]):
    """A successful answer."""

    ok: Literal[True] = True
    result: T


class NoticedEnvelope(Envelope[T], Generic[T]):
    """A successful answer that may come with a notice (a search's, a secret kept out)."""

    notice: str | None = Field(
        None,
        description="One sentence when the answer is less than asked, e.g. keywords only "
        "while the embedding model loads (searching again later uses meaning too), or "
        "when a secret was removed before storing; null otherwise.",
    )


class ErrorBody(BaseModel):
    """What went wrong, in a stable code and one sentence."""

    code: str = Field(description="Stable machine-readable code, e.g. not_found.")
    message: str = Field(description="One sentence for a person.")
    retriable: bool = Field(False, description="Whether the same request may succeed later.")
    failed_step: str | None = Field(None, description="The step that failed, when known.")
    details: Any = Field(None, description="More about the failure, e.g. the invalid fields.")


class ErrorEnvelope(BaseModel):
    """A failed answer."""

    ok: Literal[False] = False
    error: ErrorBody
