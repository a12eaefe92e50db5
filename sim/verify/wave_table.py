r"""A dump's values over time as a text table: every wave question answered without a GUI.

``nclite waves show DUMP SIGNAL... [--from C] [--to C]`` prints one row per clock cycle in
which a shown value changed, one column per signal; ``nclite waves list DUMP [PATTERN...]``
prints the names a dump holds. Both read FST and VCD with :mod:`sim.verify.waves` (pywellen).

Cycles
    Cycle c is the c-th rising edge of the clock (``<top>.clk`` unless ``clock=`` names
    another; the first edge is cycle 0), and a row shows what that edge samples: each value
    one time unit before the edge, as the flip-flops see it (:func:`sim.verify.waves.rising_edges`).
    A register written at edge c therefore shows its new value in row c + 1. With
    ``clock=None`` the rows are the dump's own times instead, one per change (and a first
    row at ``start`` with the values then, when no change falls on it).
Names
    A pattern is a full dotted name (``tensor_engine.mover.meta.valid``), the end of one after a
    dot (``meta.valid``, ``psum_out``: every signal whose name ends so), or a glob with ``*``,
    ``?`` or ``[...]`` matching either (``pe_1_*.psum_out``, ``x_row1_d*``); a name that
    matches literally (``x[0].data``) is not read as a glob. Icarus' escaped names
    (``\x[0].data``) match without their backslash; Verilator's copy of the ports
    (``$rootio``) and Yosys's own wires (``$...``) only when a pattern names them.
Values
    ``hex`` (default; 1-bit signals as 0 / 1), ``dec``, ``sdec`` (signed, two's complement),
    ``bin``, or ``float``: a 32-bit signal
    as fp32, a 16-bit one as bf16 (others in hex). A value with x or z bits is shown as its
    bits (``x``, ``xx01``).
"""

from __future__ import annotations

import difflib
import fnmatch
import re
from pathlib import Path

import numpy as np

from sim.verify import waves

__all__ = ["RADICES", "SignalNotFound", "display_name", "match", "list_signals", "table"]

RADICES = ("hex", "dec", "sdec", "bin", "float")
_GLOB = re.compile(r"[*?\[]")


class SignalNotFound(KeyError):
    """A pattern that selects no signal of the dump (the message names the closest)."""

    def __str__(self) -> str:
        return str(self.args[0])


def display_name(name: str) -> str:
    """A dump's name without Icarus' escapes: ``te.\\x[0].data`` → ``te.x[0].data``."""
    return name.replace("\\", "")


def _hidden(name: str) -> bool:
    """Verilator's ``$rootio`` copy of the ports and Yosys's own wires."""
    return any(part.startswith("$") for part in name.split("."))


def match(names, patterns) -> list[str]:
    """The dump names each pattern selects, pattern by pattern, in the dump's order.

    Parameters
    ----------
    names : iterable of str
        The dump's names (:func:`sim.verify.waves.signals`).
    patterns : iterable of str
        Full names, name ends after a dot, or globs (module docstring).

    Returns
    -------
    list of str
        The dump names, without repeats; a pattern's in natural order (``pe_1_9`` before
        ``pe_1_10``).

    Raises
    ------
    SignalNotFound
        If a pattern selects nothing; the message names the closest names.
    """
    names = list(names)
    shown = {display_name(n): n for n in names}
    out: list[str] = []
    for pat in patterns:
        pat = display_name(pat)
        visible = {d: n for d, n in shown.items() if not _hidden(d) or "$" in pat}
        if pat in shown:
            found = [shown[pat]]
        else:  # literally (x[0].data is a name, not a glob) before as a glob
            found = [n for d, n in visible.items() if d.endswith("." + pat)]
            if not found and _GLOB.search(pat):
                found = [n for d, n in visible.items()
                         if fnmatch.fnmatchcase(d, pat) or fnmatch.fnmatchcase(d, "*." + pat)]
        if not found:
            close = difflib.get_close_matches(pat, [d for d in shown if not _hidden(d)], n=3,
                                              cutoff=0.5)
            ends = sorted({d.rsplit(".", 1)[-1] for d in shown if not _hidden(d)})
            close = close or difflib.get_close_matches(pat.rsplit(".", 1)[-1], ends, n=3)
            hint = f"; close: {', '.join(close)}" if close else ""
            raise SignalNotFound(f"no signal {pat!r} in the dump{hint} "
                                 "(`nclite waves list DUMP` lists them)")
        out += [n for n in sorted(found, key=_natural) if n not in out]
    return out


def _natural(name: str) -> list:
    """``pe_1_10`` after ``pe_1_9``: numbers compare as numbers."""
    return [int(p) if p.isdigit() else p for p in re.split(r"(\d+)", display_name(name))]


def list_signals(path: Path | str, patterns=()) -> list[tuple[str, int]]:
    """The signals of a dump (those the patterns select, else all but ``$`` names), with widths.

    Returns
    -------
    list of (str, int)
        Display name and width in bits, in the dump's order.
    """
    sigs = waves.signals(path)
    names = match(sigs, patterns) if patterns else [n for n in sigs if not _hidden(n)]
    return [(display_name(n), sigs[n]) for n in names]


def _format(value: waves.Value, width: int, radix: str) -> str:
    if isinstance(value, str):
        return value  # x or z bits: as the dump has them
    if width == 1:
        return str(value)
    if radix == "dec":
        return str(value)
    if radix == "sdec":  # two's complement
        return str(value - (1 << width) if value >> (width - 1) else value)
    if radix == "bin":
        return format(value, f"0{width}b")
    if radix == "float" and width in (16, 32):
        bits = np.array([value << 16 if width == 16 else value], dtype=np.uint32)
        return f"{float(bits.view(np.float32)[0]):.9g}"  # 9 digits: every fp32 tells apart
    return format(value, f"0{(width + 3) // 4}x")


def _short_names(names: list[str]) -> list[str]:
    """Column titles: the names without the scope they all share."""
    parts = [n.split(".") for n in names]
    common = 0
    while all(len(p) > common + 1 and p[common] == parts[0][common] for p in parts):
        common += 1
    return [".".join(p[common:]) for p in parts]


def table(path: Path | str, patterns, *, clock: str | None = "clk", start: int | None = None,
          stop: int | None = None, radix: str = "hex", every: bool = False) -> str:
    """Some signals of a dump over time, as a text table.

    Parameters
    ----------
    path : Path or str
        The dump (FST or VCD).
    patterns : iterable of str
        The signals (module docstring); one column each.
    clock : str or None
        The clock whose rising edges number the cycles: a pattern that selects one signal
        (default ``clk``: the top's clock); None for a row per change at the dump's times.
    start, stop : int, optional
        The first and last cycle shown (with ``clock=None``: times in the dump's unit, which
        the table shows in ns).
    radix : str
        One of :data:`RADICES`.
    every : bool
        A row for every cycle, not only the cycles where a shown value changed.

    Returns
    -------
    str
        The table, its first line saying what a row is; ``start`` and ``stop`` rows are
        always shown.

    Raises
    ------
    SignalNotFound
        If a pattern, or the clock, selects nothing.
    ValueError
        If the clock pattern selects several 1-bit signals, the radix is unknown or the dump
        unreadable.
    """
    if radix not in RADICES:
        raise ValueError(f"radix must be one of {', '.join(RADICES)}, not {radix!r}")
    dump = waves.open_dump(path)  # once, for every read below
    sigs = waves.signals(dump)
    names = match(sigs, patterns)
    widths = [sigs[n] for n in names]
    per_ns = _ns_per_unit(dump)
    if clock is not None:
        clocks = [n for n in match(sigs, [clock]) if sigs[n] == 1]
        if len(clocks) != 1:
            top = [c for c in clocks if c.count(".") == 1]
            if len(top) != 1:
                raise ValueError(f"clock {clock!r} selects {len(clocks)} 1-bit signals "
                               f"({', '.join(map(display_name, clocks[:4]))}); name one")
            clocks = top
        sampled = waves.rising_edges(dump, clocks[0], names)
        rows = [(c, t, [vals[n] for n in names]) for c, (t, vals) in enumerate(sampled)]
        head = (f"cycle c = rising edge c of {display_name(clocks[0])} (the first is 0); "
                "each value as that edge samples it")
    else:
        by_name = waves.changes(dump, names)
        times = sorted({t for ch in by_name.values() for t, _ in ch})
        current: dict[str, waves.Value] = {}
        idx = dict.fromkeys(names, 0)
        rows = []
        for t in times:
            for n in names:
                ch = by_name[n]
                while idx[n] < len(ch) and ch[idx[n]][0] <= t:
                    current[n] = ch[idx[n]][1]
                    idx[n] += 1
            rows.append((t, t, [current.get(n, "-") for n in names]))
        head = "one row per change, at the dump's times"
    if not rows:
        raise ValueError(f"{display_name(clocks[0])} never rises in the dump: no cycles to show "
                         "(--clock none shows the changes at the dump's times)"
                         if clock is not None else "the signals never change in the dump")
    lo = rows[0][0] if start is None else start
    hi = rows[-1][0] if stop is None else stop
    kept, last = [], None
    for key, t, vals in rows:
        if key < lo or key > hi:
            last = vals
            continue
        if clock is None and not kept and key > lo and last is not None:
            kept.append((lo, lo, last))  # the state at --from, when no change falls on it
        if every or vals != last or key in (lo, hi):
            kept.append((key, t, vals))
        last = vals
    titles = (["cycle"] if clock is not None else []) + ["time (ns)"] + _short_names(
        [display_name(n) for n in names])
    body = [([str(key)] if clock is not None else []) + [f"{t * per_ns:.3f}"]
            + [_format(v, w, radix) for v, w in zip(vals, widths, strict=True)]
            for key, t, vals in kept]
    cols = [max(len(r[i]) for r in [titles, *body]) for i in range(len(titles))]
    lines = [head, "  ".join(s.rjust(w) for s, w in zip(titles, cols, strict=True))]
    lines += ["  ".join(s.rjust(w) for s, w in zip(r, cols, strict=True)) for r in body]
    if not body:
        lines.append(f"(no rows between {lo} and {hi})")
    return "\n".join(lines)


_NS = {"fs": 1e-6, "ps": 1e-3, "ns": 1.0, "us": 1e3, "ms": 1e6, "s": 1e9}


def _ns_per_unit(dump) -> float:
    """Nanoseconds per time unit of the dump (this project's dumps: 1 ps)."""
    ts = dump.timescale
    return ts.factor * _NS.get(str(ts.unit), 1e-3)
