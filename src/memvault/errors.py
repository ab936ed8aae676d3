"""One exception hierarchy for memvault.

Every error a user can cause is a :class:`MemvaultError` with a stable
``code``. The CLI maps it to one sentence and an exit code; the HTTP API and
MCP map the same code to their own envelopes, so a mistake reads the same
everywhere.
"""

from __future__ import annotations

from typing import Any, ClassVar


class MemvaultError(Exception):
    """Base class for errors that are explained to the user, never tracebacked."""

    code: ClassVar[str] = "error"
    exit_code: ClassVar[int] = 1
    http_status: ClassVar[int] = 500
    retriable: ClassVar[bool] = False

    def __init__(self, message: str, *, hint: str | None = None, **details: Any) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.details = details

    def __str__(self) -> str:
        return self.message if not self.hint else f"{self.message} {self.hint}"


class InvalidInputError(MemvaultError):
    """The caller passed a value memvault cannot accept."""

    code = "validation_failed"
    exit_code = 2
    http_status = 400


class UnsafePathError(InvalidInputError):
    """A path would leave the vault or is not a valid portable file name."""

    code = "unsafe_path"


class NotFoundError(MemvaultError):
    """The note, memory, task or contact asked for does not exist."""

    code = "not_found"
    exit_code = 3
    http_status = 404


class ConflictError(MemvaultError):
    """The operation would overwrite something that already exists."""

    code = "conflict"
    exit_code = 4
    http_status = 409


class VaultError(MemvaultError):
    """The vault cannot be used (missing, not writable, locked)."""

    code = "vault_unavailable"
    exit_code = 5
    http_status = 503
    retriable = True


class ConfigError(MemvaultError):
    """The configuration file or environment holds an invalid setting."""

    code = "invalid_config"
    exit_code = 6
    http_status = 500


class EmbeddingError(MemvaultError):
    """The embedding model or service failed; keyword search still works."""

    code = "embedding_failed"
    http_status = 503
    retriable = True
