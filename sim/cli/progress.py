"""Progress bars for the long runs (benchmarks, synthesis sweeps, bitstreams), on stderr.

One small wrapper around ``rich.progress`` so that every long job looks the same: a bar with the
number of runs done, the elapsed time and the current step, and log lines printed above it.
When stderr is not a terminal (CI logs, pipes) there is no animation: the log lines are plain,
so logs stay readable, and stdout stays clean for ``--json``.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
)

__all__ = ["Bar", "bar"]


class Bar:
    """A running progress bar: :meth:`log` prints above it, :meth:`advance` moves it."""

    def __init__(self, progress: Progress | None, task, prefix: str):
        self._progress, self._task, self._prefix = progress, task, prefix

    def log(self, msg: str) -> None:
        if self._progress is not None:
            self._progress.console.print(f"{self._prefix}{msg}", markup=False, highlight=False)
        else:
            print(f"{self._prefix}{msg}", file=sys.stderr, flush=True)

    def status(self, msg: str) -> None:
        """Show ``msg`` as the current step (and log it)."""
        if self._progress is not None:
            self._progress.update(self._task, status=msg)
        self.log(msg)

    def advance(self, steps: int = 1) -> None:
        if self._progress is not None:
            self._progress.advance(self._task, steps)


@contextlib.contextmanager
def bar(description: str, total: int | None, *, prefix: str = "",
        console: Console | None = None) -> Iterator[Bar]:
    """A progress bar of ``total`` steps (``None``: a spinner with the elapsed time)."""
    console = console or Console(stderr=True)
    if not console.is_terminal:
        yield Bar(None, None, prefix)
        return
    columns = [SpinnerColumn(), TextColumn("[bold]{task.description}")]
    if total is not None:
        columns += [BarColumn(), MofNCompleteColumn()]
    columns += [TimeElapsedColumn(), TextColumn("{task.fields[status]}")]
    with Progress(*columns, console=console, transient=False) as progress:
        task = progress.add_task(description, total=total, status="")
        yield Bar(progress, task, prefix)
