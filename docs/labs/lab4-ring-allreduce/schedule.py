"""Print the ring schedule of ``golden/collective.py`` step by step, and what every chunk holds.

    python docs/labs/lab4-ring-allreduce/schedule.py [--ranks 4] [--n 4] [--link-width 1]
                                                     [--op all-reduce] [--trace]

The table: for each step, the chunk each rank sends to rank + 1 and the chunk it receives
from rank - 1 (``+`` when it adds it to its own copy, ``=`` when it stores it), from
``golden.collective.ring_steps``; the chunk bounds from ``golden.collective.chunk_words``.

``--trace``: rank r starts with the value 2**r in every word, so a sum of some ranks' values is
exact in fp32 and its bits say which ranks it contains. After every step each rank's chunks are
printed as the terms they sum, in the order they were added (``2+3+0`` is ``(x2 + x3) + x0``,
checked against those bits); the steps run in lockstep with the golden fp32 add, and the
final buffers are compared with ``golden.collective.run_collective`` (exit status 1 if they
differ). Run it from the tree you are working in: it imports that tree's ``golden/``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))

from golden.collective import CollectiveOp, chunk_words, ring_steps, run_collective  # noqa: E402
from golden.fp32 import fp32_add  # noqa: E402

OPS = {"all-reduce": CollectiveOp.ALL_REDUCE, "reduce-scatter": CollectiveOp.REDUCE_SCATTER,
       "all-gather": CollectiveOp.ALL_GATHER}


def table(op, ranks: int) -> list[list[str]]:
    """One row per step: the phase, then ``send c -> / <- recv c (+|=)`` per rank."""
    steps = [ring_steps(op, ranks, r) for r in range(ranks)]
    rows = []
    for s in range(len(steps[0])):
        phase = "reduce-scatter" if steps[0][s].reduce else "all-gather"
        rows.append([str(s), phase] + [
            f"send {st.send}, recv {st.recv} {'+' if st.reduce else '='}"
            for st in (steps[r][s] for r in range(ranks))])
    return rows


def contents(op, ranks: int, n: int, link_width: int):
    """Run the schedule in lockstep on rank r = 2**r; yield (step, phase, terms) at the start
    and after every step. ``terms[r][c]`` lists the ranks whose values word 0 of chunk c of
    rank r holds, in the order they were added (``[1, 2, 0]`` is ``(x1 + x2) + x0``), None for
    an empty chunk; the set is checked against the bits of the fp32 sum. Returns the final
    buffers (uint32)."""
    bounds = chunk_words(n, ranks, link_width)
    bufs = [np.full(n, np.float32(2.0**r)).view(np.uint32) for r in range(ranks)]
    terms = [[[r] if bounds[c] < bounds[c + 1] else None for c in range(ranks)]
             for r in range(ranks)]
    steps = [ring_steps(op, ranks, r) for r in range(ranks)]

    def check():
        for r in range(ranks):
            for c in range(ranks):
                if terms[r][c] is not None:
                    v = int(bufs[r][bounds[c]:bounds[c] + 1].view(np.float32)[0])
                    assert sorted(terms[r][c]) == [k for k in range(ranks) if v >> k & 1]
        return [[None if t is None else list(t) for t in row] for row in terms]

    yield -1, "start", check()
    for s in range(len(steps[0])):
        sent = [(bufs[r][bounds[steps[r][s].send]:bounds[steps[r][s].send + 1]].copy(),
                 terms[r][steps[r][s].send]) for r in range(ranks)]
        for r in range(ranks):
            st = steps[r][s]
            lo, hi = bounds[st.recv], bounds[st.recv + 1]
            incoming, inc_terms = sent[(r - 1) % ranks]
            if st.reduce:  # received + local: the received partial sum is the left operand
                bufs[r][lo:hi] = fp32_add(incoming, bufs[r][lo:hi])
                if inc_terms is not None:
                    terms[r][st.recv] = inc_terms + terms[r][st.recv]
            else:
                bufs[r][lo:hi] = incoming
                terms[r][st.recv] = inc_terms
        yield s, "reduce-scatter" if steps[0][s].reduce else "all-gather", check()
    return bufs


def _fmt_terms(terms):
    return "-" if terms is None else "+".join(map(str, terms))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ranks", type=int, default=4, help="P (default 4)")
    ap.add_argument("--n", type=int, default=None, help="words per rank (default P)")
    ap.add_argument("--link-width", type=int, default=1, help="W: 1, 2 or 4 (default 1)")
    ap.add_argument("--op", choices=list(OPS), default="all-reduce")
    ap.add_argument("--trace", action="store_true", help="print every chunk after every step")
    a = ap.parse_args(argv)
    op, p = OPS[a.op], a.ranks
    n = a.n if a.n is not None else p
    bounds = chunk_words(n, p, a.link_width)
    print(f"{a.op} on a ring of {p} ranks, n = {n} words, W = {a.link_width}: chunks "
          + " ".join(f"{c}=[{bounds[c]},{bounds[c + 1]})" for c in range(p)))
    rows = [["step", "phase"] + [f"rank {r}" for r in range(p)]] + table(op, p)
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())
    if not a.trace:
        return 0
    if p > 24:
        print("--trace needs P <= 24 (the sums 2**0 + ... must be exact in fp32)")
        return 1
    print("\nword 0 of chunk 0, 1, ... on every rank: whose values it sums, in the order added")
    gen = contents(op, p, n, a.link_width)
    try:
        while True:
            s, phase, terms = next(gen)
            head = "start" if s < 0 else f"after step {s} ({phase})"
            print(f"{head}:")
            for r in range(p):
                cells = [_fmt_terms(t).ljust(len(str(p - 1)) * p + p - 1) for t in terms[r]]
                print(f"  rank {r}: " + "  ".join(cells).rstrip())
    except StopIteration as stop:
        final = stop.value
    start = [np.full(n, np.float32(2.0**r)).view(np.uint32) for r in range(p)]
    want = run_collective(op, start, a.link_width)
    same = all(np.array_equal(f, w) for f, w in zip(final, want, strict=True))
    print("final buffers " + ("equal golden.collective.run_collective's" if same else
                              "DIFFER from golden.collective.run_collective's"))
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
