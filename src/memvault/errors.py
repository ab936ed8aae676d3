"""One exception hierarchy for memvault.

Every error a user can cause is a :class:`MemvaultError` with a stable
``code``. The CLI maps it to one sentence and an exit code; the HTTP API and
MCP map the same code to their own envelopes, so a mistake reads the same
everywhere.
"""

from __future__ import annotations

from typing import Any, ClassVar

# Every exit status of the ``memvault`` command (docs/exit-codes.md lists the same).
EXIT_OK = 0
EXIT_FAILED = 1  # a check or run failed (doctor, ask, serve --status: no daemon) or declined
EXIT_NOT_APPROVED = 8  # a tier 2 or 3 tool call was not approved
EXIT_INTERNAL = 70  # a bug in memvault (EX_SOFTWARE); the message asks for a report
EXIT_INTERRUPTED = 130  # Ctrl-C (128 + SIGINT)
EXIT_CODES: dict[int, str] = {
    EXIT_OK: "success",
    EXIT_FAILED: "failed: a check or run failed, or a question was answered no",
    2: "invalid input (also a mistyped command or option)",
    3: "not found",
    4: "conflict: it already exists, or a daemon already serves the vault",
    5: "vault unavailable: missing, not initialised, read-only or locked",
    6: "invalid configuration (or no language model configured)",
    7: "the language model failed",
    EXIT_NOT_APPROVED: "not approved: a tool call, or a send to someone not let in",
    EXIT_INTERNAL: "internal error: a bug, please report it",
    EXIT_INTERRUPTED: "interrupted (Ctrl-C)",
}


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


class NotTextError(InvalidInputError):
    """A file in the vault is not UTF-8 text, so it cannot be read as a note.

    Readers that go through many files (listings, the index, the context)
    leave such a file out rather than fail: one bad file breaks only itself.
    """


class SecretRefusedError(InvalidInputError):
    """Text to be stored holds a secret and ``[privacy] secrets = "refuse"``: nothing was
    stored (:mod:`memvault.privacy.secrets`)."""

    code = "secret_refused"
    http_status = 422


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


class StorageError(MemvaultError):
    """The database behind the index and the state cannot be used (PostgreSQL unreachable,
    pgvector missing, a schema written by a newer memvault)."""

    code = "storage_unavailable"
    exit_code = 5
    http_status = 503
    retriable = True


class ConfigError(MemvaultError):
    """The configuration file or environment holds an invalid setting."""

    code = "invalid_config"
    exit_code = 6
    http_status = 500


class MissingExtraError(ConfigError):
    """The settings ask for a part the default install leaves out (an extra of the package:
    :mod:`memvault.extras`); the message names the extra that brings it."""

    code = "missing_extra"
    http_status = 503


class EmbeddingError(MemvaultError):
    """The embedding model or service failed; keyword search still works."""

    code = "embedding_failed"
    http_status = 503
    retriable = True


def exit_code_for(code: str | None) -> int:
    """The exit status for an error ``code`` (a tool result's, a daemon's answer's)."""
    if code == "not_approved":
        return EXIT_NOT_APPROVED
    pending: list[type[MemvaultError]] = [MemvaultError]
    while pending:
        cls = pending.pop()
        if cls.code == code and cls is not MemvaultError:
            return cls.exit_code
        pending.extend(cls.__subclasses__())
    return EXIT_FAILED
