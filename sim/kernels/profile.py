"""A profile of a kernel's RTL run, as the Neuron Profiler draws one: each engine's busy
intervals against the cycle count, the commands labelled where they were dispatched.

The figures come from the core itself: :class:`hdl.activity.ActivityRecorder` records every
change of the core's ``activity`` (which engines are busy, the dispatch count) with its cycle;
``sim/tb/kernel.py`` reads the entries after the run (:func:`decode`).
"""

from __future__ import annotations

from golden.isa import Opcode
from golden.isa import decode as decode_descriptor

__all__ = ["ENGINES", "decode", "intervals", "dispatches", "draw"]

#: The engines of ``hdl.core.ACTIVITY_ENGINES``, bit 0 first (golden/ and sim/ do not import
#: hdl/ for this; ``tests/kernels`` checks that they agree).
ENGINES = ("tensor", "activation", "dma", "collective")


def decode(words) -> list[tuple[int, int, int]]:
    """Recorder entries (``hdl.activity.ActivityEventLayout`` as integers) as
    ``(cycle, busy bits, executed)``."""
    mask = (1 << 32) - 1
    return [(w & mask, (w >> 32) & ((1 << len(ENGINES)) - 1), (w >> (32 + len(ENGINES))) & mask)
            for w in words]


def intervals(events, end: int) -> dict[str, list[tuple[int, int]]]:
    """Each engine's busy intervals ``[start, stop)`` in cycles, from the decoded ``events``
    (the state holds from an entry's cycle until the next entry's, the last until ``end``)."""
    out: dict[str, list[tuple[int, int]]] = {e: [] for e in ENGINES}
    for i, (cycle, busy, _) in enumerate(events):
        stop = events[i + 1][0] if i + 1 < len(events) else end
        for bit, engine in enumerate(ENGINES):
            if busy >> bit & 1 and stop > cycle:
                spans = out[engine]
                if spans and spans[-1][1] == cycle:
                    spans[-1] = (spans[-1][0], stop)
                else:
                    spans.append((cycle, stop))
    return out


def dispatches(events) -> list[tuple[int, int]]:
    """``(cycle, command index)`` of every dispatch: the cycle from which EXECUTED counts it
    (the first entry's count is the base)."""
    if not events:
        return []
    out, base = [], events[0][2]
    prev = base
    for cycle, _, executed in events[1:]:
        for index in range(prev, executed):
            out.append((cycle, index - base))
        prev = executed
    return out


_SHORT = {Opcode.DMA_LOAD: "load", Opcode.DMA_STORE: "store", Opcode.LOAD_STATIONARY: "ls",
          Opcode.MATMUL: "mm", Opcode.ACTIVATE: "act", Opcode.COLLECTIVE: "coll",
          Opcode.BARRIER: "bar", Opcode.SET_SEED: "seed", Opcode.TENSOR_TENSOR: "tt",
          Opcode.TENSOR_SCALAR: "ts", Opcode.TENSOR_REDUCE: "red", Opcode.TRANSPOSE: "tr"}
assert set(_SHORT) == set(Opcode), "every opcode needs a label in the profile"


#: Label levels above a core's engines, and their spacing in engine rows.
_LABEL_LEVELS, _LABEL_STEP = 3, 0.9


def _label(words, line) -> str:
    op = _SHORT[Opcode(decode_descriptor(words)[0])]
    return f"{op} :{line[1]}" if line and line[1] else op


def draw(path, cores: list[dict], title: str) -> None:
    """Write a PNG: per core (``{"events", "end", "program", "lines"}``), a row per engine
    with its busy intervals, and above them each command (opcode, kernel line) at the cycle it
    was dispatched. Cycle 0 is the first dispatch of any core."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    band = 0.25 + _LABEL_STEP * _LABEL_LEVELS  # the labels' band above each core's engines
    rows = len(cores) * (len(ENGINES) + band)
    fig, ax = plt.subplots(figsize=(14, 1.4 + 0.42 * rows))
    colors = {"tensor": "tab:red", "activation": "tab:green", "dma": "tab:blue",
              "collective": "tab:purple"}
    firsts = [d[0][0] for d in (dispatches(c["events"]) for c in cores) if d]
    start = min(firsts) if firsts else 0
    # Labels closer than a label's width (in cycles: the axes' ~12 inches of 72 points span
    # the run; a label is ~8 points wide) go on the next of _LABEL_LEVELS levels up.
    span = max(1, max(c["end"] for c in cores) - start)
    gap = span * 8 / (12 * 72)
    ticks, names = [], []
    y = 0.0
    for r, core in enumerate(cores):
        spans = intervals(core["events"], core["end"])
        for engine in ENGINES:
            ax.broken_barh([(a - start, b - a) for a, b in spans[engine]], (y, 0.8),
                           color=colors[engine])
            ticks.append(y + 0.4)
            names.append(f"core {r} {engine}" if len(cores) > 1 else engine)
            y += 1
        last = [-gap] * _LABEL_LEVELS  # the cycle of each level's last label
        for cycle, index in dispatches(core["events"]):
            if index < len(core["program"]):
                x = cycle - start
                level = next((k for k in range(_LABEL_LEVELS) if x - last[k] >= gap),
                             min(range(_LABEL_LEVELS), key=last.__getitem__))
                last[level] = x
                top = y + 0.15 + _LABEL_STEP * level
                ax.plot([x] * 2, [y - len(ENGINES), top - 0.05], color="0.8", lw=0.4, zorder=0)
                ax.text(x, top, _label(core["program"][index], core["lines"][index]),
                        fontsize=5.5, rotation=90, va="bottom", ha="center")
        y += band
    ax.set_yticks(ticks, names)
    ax.set_xlabel("cycle (0: the first command dispatched; labels: opcode and kernel line)")
    ax.set_xlim(left=-0.01 * max(1, max(c["end"] for c in cores) - start))
    ax.set_ylim(-0.2, y)
    ax.set_title(title)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
