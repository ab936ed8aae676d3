"""Progress where a person waits: a bar for counted work, a spinner for the rest.

Both are drawn on stderr, and only when stderr is a terminal and the person did not ask
for quiet (``--quiet``, or ``--json`` for scripts): piped output gets nothing extra.
A bar appears once the work is known to be large enough (``after`` items), so a
command that finishes at once does not flash one.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Annotated, Any

import typer

from memvault.cli.common import stderr

if TYPE_CHECKING:
    from rich.progress import Progress, TaskID

# What a bar calls a stage of the index's work, by the label the index reports it with.
INDEX_STAGES = {"embedding": "Embedding", "vectors": "Copying vectors"}

QuietOption = Annotated[
    bool, typer.Option("--quiet", "-q", help="No progress bar or spinner on the terminal.")
]


def shown(quiet: bool = False) -> bool:
    """Whether progress is drawn: a terminal on stderr, and no quiet asked for."""
    return not quiet and sys.stderr.isatty()


class Bar:
    """A progress bar started on the first update that reports more than ``after`` items;
    work in stages (embedding, copying) gets a line per stage."""

    def __init__(self, description: str, *, after: int, stages: Mapping[str, str]) -> None:
        self.description = description
        self.after = after
        self.stages = stages
        self._bar: Progress | None = None
        self._tasks: dict[str, TaskID] = {}

    def __call__(self, done: int, total: int, stage: str = "") -> None:
        """``done`` of ``total`` items of ``stage`` are finished."""
        if self._bar is None:
            if total <= self.after:
                return
            self._bar = _new_bar()
            self._bar.start()
        label = self.stages.get(stage, self.description)
        if label not in self._tasks:
            self._tasks[label] = self._bar.add_task(label, total=total)
        self._bar.update(self._tasks[label], completed=done, total=total)

    def stop(self) -> None:
        if self._bar is not None:
            self._bar.stop()


@contextlib.contextmanager
def progress(
    description: str,
    *,
    quiet: bool = False,
    after: int = 0,
    stages: Mapping[str, str] | None = None,
) -> Iterator[Bar | None]:
    """A :class:`Bar` to pass as the work's progress callback; None when not drawn."""
    if not shown(quiet):
        yield None
        return
    bar = Bar(description, after=after, stages=stages or {})
    try:
        yield bar
    finally:
        bar.stop()


@contextlib.contextmanager
def spinner(description: str, *, quiet: bool = False) -> Iterator[None]:
    """A spinner with ``description`` while the block runs, for work that cannot count."""
    if not shown(quiet):
        yield
        return
    with stderr.get().status(description, spinner="dots"):
        yield


def _new_bar() -> Progress:
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeRemainingColumn,
    )

    columns: list[Any] = [
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
    ]
    return Progress(*columns, console=stderr.get(), transient=True)
