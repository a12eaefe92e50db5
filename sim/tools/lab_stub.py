"""A lab's scratch copy: what it is, and one line when a stub is reached there.

In a copy made by :func:`sim.tools.labs.start`, the exercises' regions hold stubs that raise
``NotImplementedError("lab <N>: ...")``. A command that reaches one should say so in one line,
naming the copy and where the lab's tasks run instead (the main tree): ``nclite`` does it in
its error handler, pytest in ``tests/conftest.py``, and any other Python program of the copy
(``python -c ...``, a lab's script) through :func:`install_excepthook`, which the copy's
``hdl`` and ``golden`` packages call on import. Only the standard library here: the copy's
design packages import this without the rest of ``sim``.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

__all__ = ["MARKER", "REPO_ROOT", "lab_copy", "stub_message", "silence_unused_elaboratables",
           "install_excepthook"]

#: Written into every scratch copy: ``--force`` deletes only a directory that holds it.
MARKER = ".nclite-lab"
REPO_ROOT = Path(__file__).resolve().parents[2]


def lab_copy(tree: Path = REPO_ROOT) -> tuple[int, Path] | None:
    """(lab number, main tree) if ``tree`` is a scratch copy made by :func:`start`, else None."""
    try:
        text = (tree / MARKER).read_text()
    except OSError:
        return None
    m = re.match(r"lab (\d+): made by .* from (.+)$", text.strip())
    return (int(m[1]), Path(m[2])) if m else None


#: What every stub raises: ``NotImplementedError("lab <N>: <what to write> (<the lab's text>)")``
#: (tests/tools/test_labs.py checks that each stub does).
_STUB = re.compile(r"lab (\d+): ")


def stub_message(exc: BaseException, tree: Path = REPO_ROOT) -> str | None:
    """One line for an exception a lab's stub raised, else None.

    In a scratch copy whose exercise is not written yet, every command that reaches the stub
    fails: the line says so and where the lab's tasks run instead (the main tree).
    """
    if not (isinstance(exc, NotImplementedError) and _STUB.match(str(exc))):
        return None
    copy = lab_copy(tree)
    if copy is None:
        return f"{exc}: a lab's stub is in this tree's code"
    number, home = copy
    return (f"{exc}: {tree} is lab {number}'s scratch copy, where the exercise is yours to "
            f"write; the lab's tasks run in the main tree ({home}), the exercise's check here "
            f"(make lab{number}-check)")


def silence_unused_elaboratables(silent: bool = True) -> None:
    """No "created but never used" warning for the half-built components an error leaves (a
    wall of them around the one line that matters): what Amaranth's own excepthook does for an
    exception nothing catches. ``silent=False`` turns the warnings back on."""
    try:
        from amaranth._unused import MustUse
    except ImportError:
        return
    MustUse._MustUse__silence = silent


def install_excepthook() -> None:
    """An uncaught stub error prints its one line (and no "created but never used" warnings),
    any other exception the usual traceback."""
    previous = sys.excepthook

    def hook(kind, exc, tb):
        line = stub_message(exc)
        if line is None:
            return previous(kind, exc, tb)
        silence_unused_elaboratables()
        print(f"error: {line}", file=sys.stderr)
        return None

    sys.excepthook = hook
