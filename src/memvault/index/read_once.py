"""A value the PostgreSQL stores ask the database for at most once a search.

A search holds :meth:`ReadOnce.pinned` around its reads. Within it (however deeply
nested), the first :meth:`ReadOnce.get` asks and the later ones get that answer, so
what one search reads is one state of the index and costs one statement. Outside a
pin every call asks afresh. The answer is forgotten when the outermost pin ends, or
at :meth:`ReadOnce.forget` (a write in between).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

T = TypeVar("T")


class ReadOnce(Generic[T]):
    """One value (never None) read once while a search holds the pin."""

    def __init__(self) -> None:
        self._pins = 0  # searches holding ``pinned``
        self._held: T | None = None

    @contextlib.contextmanager
    def pinned(self) -> Iterator[None]:
        """Within the block, :meth:`get` reads once."""
        self._pins += 1
        try:
            yield
        finally:
            self._pins -= 1
            if not self._pins:
                self._held = None

    def get(self, read: Callable[[], T]) -> T:
        """The value held in the pinned block, else what ``read`` answers (held if pinned)."""
        if self._held is not None:
            return self._held
        value = read()
        if self._pins:
            self._held = value
        return value

    def forget(self) -> None:
        """Read afresh next time, pinned or not."""
        self._held = None
