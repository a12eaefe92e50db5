"""A pipeline whose outputs are right but a few cycles off: the shift, for a check's message.

A unit with one register too many (or too few) on its path gives the expected values, each
one result late (or early). :func:`shift_of` finds that shift in a failed comparison, so a
check can say "one cycle late" instead of listing thousands of mismatches.
"""

from __future__ import annotations

import numpy as np

__all__ = ["shift_of", "shift_hint"]


def shift_of(got, want, *, most: int = 3, share: float = 0.9) -> int | None:
    """The d in 1..``most`` or -``most``..-1 (smallest first) for which ``got[i] ==
    want[i - d]`` holds for at least ``share`` of the overlapping results, or None.

    d > 0: each result comes d results late (it is the one expected d earlier)."""
    got, want = np.asarray(got), np.asarray(want)
    for d in (s * k for k in range(1, most + 1) for s in (1, -1)):
        g, w = (got[d:], want[:-d]) if d > 0 else (got[:d], want[-d:])
        if len(g) and np.mean(g == w) >= share:
            return d
    return None


def shift_hint(got, want, stages: int, what: str = "product") -> str:
    """``": each product comes d enabled cycle(s) late (...)"``, or "" when no shift fits:
    for a failure message of a unit built with ``stages`` registers on its path."""
    d = shift_of(got, want)
    if d is None:
        return ""
    late, before = ("late", "before") if d > 0 else ("early", "after")
    return (f": each {what} comes {abs(d)} enabled cycle(s) {late} (each is the {what} of the "
            f"operands offered {abs(d)} {before} it): {stages + d} registers on the path, not "
            f"stages = {stages}")
