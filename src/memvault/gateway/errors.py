"""Errors as the HTTP API reports them: one envelope, stable codes.

``{"ok": false, "error": {"code", "message", "retriable", "failed_step",
"details"}}``. memvault's own errors carry their code and HTTP status
(:mod:`memvault.errors`); the framework's (unknown path, wrong method, bad
JSON, invalid fields) are mapped here, once.
"""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException
from starlette.responses import JSONResponse
from starlette.routing import Match

from memvault.errors import MemvaultError

log = logging.getLogger(__name__)

# Status -> code for errors raised by the framework itself.
_HTTP_CODES = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    409: "conflict",
    413: "payload_too_large",
    415: "unsupported_media_type",
    503: "unavailable",
}
_HTTP_MESSAGES = {
    404: "There is no such route; see /openapi.json for the API.",
    405: "This route does not take that method.",
}
# FastAPI's words for a body it could not even decode (bytes that are not UTF-8).
_UNPARSED_BODY = "There was an error parsing the body"


class ApiError(Exception):
    """An error answer: raise it from a route or a middleware."""

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        *,
        retriable: bool = False,
        failed_step: str | None = None,
        details: Any = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.retriable = retriable
        self.failed_step = failed_step
        self.details = details
        self.headers = headers

    def response(self) -> JSONResponse:
        """The envelope as a response."""
        return JSONResponse(
            {
                "ok": False,
                "error": {
                    "code": self.code,
                    "message": self.message,
                    "retriable": self.retriable,
                    "failed_step": self.failed_step,
                    "details": self.details,
                },
            },
            status_code=self.status,
            headers=self.headers,
        )


def from_memvault(exc: MemvaultError) -> ApiError:
    """A memvault error as an API error (its code, its status, hint included)."""
    details = exc.details or None
    if exc.hint:
        details = {**(details or {}), "hint": exc.hint}
    return ApiError(
        exc.http_status, exc.code, exc.message, retriable=exc.retriable, details=details
    )


def _field(loc: tuple[Any, ...]) -> str:
    parts = [str(p) for p in loc if p not in ("body", "query", "path", "header")]
    return ".".join(parts) or "body"


# Parameters whose HTTP name is not the one the CLI and the docs use for the value.
_NAMES = {"q": "the query (q)", "body": "the request body"}
# What a value of the wrong type should have been, by pydantic's error type.
_KINDS = {
    "int": "a whole number",
    "float": "a number",
    "bool": "true or false",
    "string": "text",
    "list": "a list",
    "dict": "an object",
    "model": "an object",
    "model_attributes": "an object",
    "datetime": "a date and time (ISO 8601) or a Unix time",
    "date": "a date (YYYY-MM-DD)",
}
# A number out of range, by pydantic's error type: the words and the bound's key.
_BOUNDS = {
    "greater_than_equal": ("at least", "ge"),
    "less_than_equal": ("at most", "le"),
    "greater_than": ("above", "gt"),
    "less_than": ("below", "lt"),
}


def _problem(field: str, error: Any) -> str:
    """One pydantic error as words: what the field takes, named as people know it."""
    name = _NAMES.get(field, field)
    kind = str(error.get("type", ""))
    ctx = error.get("ctx") or {}
    if kind == "missing":
        return f"{name} is required"
    if kind == "extra_forbidden":
        return f"{name} is not a field this route takes"
    if kind == "string_too_short":
        if ctx.get("min_length") == 1:
            return f"{name} is empty"
        return f"{name} must be at least {ctx.get('min_length')} characters"
    if kind == "string_too_long":
        return f"{name} must be at most {ctx.get('max_length')} characters"
    if kind in ("too_short", "too_long"):
        bound = "at least" if kind == "too_short" else "at most"
        limit = ctx.get("min_length", ctx.get("max_length"))
        return f"{name} must have {bound} {limit} item{'s' if limit != 1 else ''}"
    if kind == "int_parsing_size":  # more digits than any bound: pydantic stops reading
        return f"{name} is too large a number"
    if kind in _BOUNDS:
        words, key = _BOUNDS[kind]
        return f"{name} must be {words} {ctx.get(key)}"
    if kind in ("literal_error", "enum"):
        return f"{name} must be {ctx.get('expected')}"
    if kind == "string_pattern_mismatch":
        return f"{name} is not in the expected form ({ctx.get('pattern')})"
    base = kind.removesuffix("_type").removesuffix("_parsing").removesuffix("_from_datetime")
    if base in _KINDS:
        return f"{name} must be {_KINDS[base]}"
    message = str(error.get("msg", "is invalid")).removeprefix("Value error, ").rstrip(".")
    return f"{name}: {message[:1].lower()}{message[1:]}"


def from_validation(exc: RequestValidationError) -> ApiError:
    """Invalid JSON becomes ``invalid_json``; invalid fields ``validation_failed``, in one
    sentence naming each field (the details list them one by one)."""
    errors = list(exc.errors())
    if any(e.get("type") == "json_invalid" for e in errors):
        return ApiError(400, "invalid_json", "The request body is not valid JSON.")
    problems = []
    for error in errors:
        field = _field(tuple(error.get("loc", ())))
        problems.append({"field": field, "message": _problem(field, error) + "."})
    shown = "; ".join(p["message"].rstrip(".") for p in problems[:3])
    more = f" (and {len(problems) - 3} more)" if len(problems) > 3 else ""
    # A field keeps its name as sent (importance, memory_id); a phrase starts a sentence.
    sentence = f"{'T' + shown[1:] if shown.startswith('the ') else shown}{more}."
    return ApiError(400, "validation_failed", sentence, details=problems)


def allowed_methods(request: Request) -> list[str]:
    """Every method some route of the app takes at the request's path."""
    methods: set[str] = set()
    for route in request.app.router.routes:
        match, _ = route.matches({**request.scope, "method": "__none__"})
        if match != Match.NONE:
            methods.update(getattr(route, "methods", None) or ())
    return sorted(methods)


def install(app: FastAPI) -> None:
    """Render every error of ``app`` as the envelope."""

    async def api_error(_request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, ApiError)
        return exc.response()

    async def memvault_error(_request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, MemvaultError)
        return from_memvault(exc).response()

    async def validation_error(_request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestValidationError)
        return from_validation(exc).response()

    async def http_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, HTTPException)
        code = _HTTP_CODES.get(exc.status_code, "error")
        message = _HTTP_MESSAGES.get(exc.status_code) or str(exc.detail)
        if exc.status_code == 400 and exc.detail == _UNPARSED_BODY:
            code, message = "invalid_json", "The request body is not valid JSON (UTF-8 text)."
        headers = dict(exc.headers) if exc.headers else None
        if exc.status_code == 405:
            # Starlette names the methods of one route; a path may have several.
            headers = {**(headers or {}), "Allow": ", ".join(allowed_methods(request))}
        return ApiError(exc.status_code, code, message, headers=headers).response()

    async def unexpected(_request: Request, exc: Exception) -> JSONResponse:
        log.exception("request failed", exc_info=exc)
        return ApiError(
            500,
            "internal_error",
            f"memvault failed unexpectedly ({type(exc).__name__}); the daemon log has details.",
            retriable=True,
        ).response()

    app.add_exception_handler(ApiError, api_error)
    app.add_exception_handler(MemvaultError, memvault_error)
    app.add_exception_handler(RequestValidationError, validation_error)
    app.add_exception_handler(HTTPException, http_error)
    app.add_exception_handler(Exception, unexpected)
