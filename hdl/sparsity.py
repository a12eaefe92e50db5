"""Structured sparsity in hardware: which n:m patterns an engine takes, and the sizes they imply.

A sparse-capable tensor engine (``golden.sparse``: a compressed stationary tile of S <= N slots
for up to R·N rows of K, R = m / n) needs, per PE, a window of moving values to pick from by
tag, and a moving column of up to R·N rows. The codes are ``golden.isa.Sparsity``'s.
"""

from amaranth.hdl import Const, Mux, Signal
from amaranth.lib import data

from golden import isa as _isa
from golden.sparse import PATTERNS

from .formats import Fmt

__all__ = ["SPARSITY_CODES", "WEIGHT_LANE", "MAX_RATIO", "parse_sparsity", "window",
           "moving_rows", "sparse_column_layout", "slots_of", "ceil_div", "ratio_of",
           "times_ratio"]

#: A lane of a sparse engine's stationary row: the value and its tag, as the SBUF word holds
#: them (``golden.sparse.pack_words``: the tag at bit 16).
WEIGHT_LANE = data.StructLayout({"data": 16, "tag": 4})

#: pattern name -> its ``sparsity`` code (``golden.isa.Sparsity``).
SPARSITY_CODES = {s.pattern: int(s) for s in _isa.Sparsity if s.pattern}


def parse_sparsity(sparsity, *, param: str = "sparsity") -> dict[int, tuple[int, int]]:
    """``{code: (n, m)}`` of a collection of pattern names (``"4:16"``), in code order.

    Raises :class:`TypeError` if ``sparsity`` is not a collection (a single name), and
    :class:`ValueError` naming ``param`` for an unknown pattern."""
    if isinstance(sparsity, str) or not hasattr(sparsity, "__iter__"):
        raise TypeError(f"{param} must be a collection of pattern names, not {sparsity!r}")
    out = {}
    for name in sparsity:
        if name not in SPARSITY_CODES:
            raise ValueError(f"{param} must name patterns of {', '.join(PATTERNS)}, not "
                             f"{name!r}")
        out[SPARSITY_CODES[name]] = PATTERNS[name]
    return dict(sorted(out.items()))


def window(sparsity: dict) -> int:
    """Moving values a PE picks from: 1 if dense only, else the largest ``m − n + 1``."""
    return max((m - n + 1 for n, m in sparsity.values()), default=1)


def moving_rows(n: int, sparsity: dict) -> int:
    """Rows of K a moving column carries: ``n``, or the largest ``m / n`` times ``n``."""
    return n * max((m // k for k, m in sparsity.values()), default=1)


def sparse_column_layout(n: int, sparsity: dict) -> data.StructLayout:
    """A sparse engine's moving column into the array: its rows of K (``data``), format,
    ``swap``, the tile's ``mode`` (0 dense, else the pattern's code) and ``slots`` (stationary
    rows: PE rows at or past it are padding)."""
    return data.StructLayout({
        "data": data.ArrayLayout(16, moving_rows(n, sparsity)), "fmt": Fmt, "swap": 1,
        "mode": range(max(sparsity) + 1), "slots": range(n + 1)})


#: The largest m / n of a pattern (4:16): moving rows a partition holds, stationary rows a slot
#: stands for.
MAX_RATIO = max(m // n for n, m in PATTERNS.values())


def _div3(m, value, name):
    """``value // 3`` for values below 1024 (``(v · 683) >> 11`` is exact there)."""
    assert len(value) <= 10
    q = Signal(range(342), name=name)
    m.d.comb += q.eq((value * 683) >> 11)
    return q


def ceil_div(m, value, r, *, name: str):
    """A signal: ``ceil(value / r)`` for ``r`` (a signal) in 1..4 and ``value`` of at most 9
    bits (``value + 2`` is divided by 3 below 1024)."""
    out = Signal(len(value), name=name)
    with m.Switch(r):
        for k in (1, 2, 4):
            with m.Case(k):
                m.d.comb += out.eq((value + k - 1) >> (k.bit_length() - 1))
        with m.Case(3):
            v2 = Signal(len(value) + 1, name=f"{name}_p2")
            m.d.comb += [v2.eq(value + 2), out.eq(_div3(m, v2, f"{name}_d3"))]
    return out


def times_ratio(m, value, r, *, name: str, width: int):
    """A signal of ``width`` bits: ``value · r`` for ``r`` (a signal) in 1..4, as shifts and
    one adder (a multiplier's block would be the longest path of a check)."""
    out = Signal(width, name=name)
    with m.Switch(r):
        for k in (1, 2, 4):
            with m.Case(k):
                m.d.comb += out.eq(value << (k.bit_length() - 1))
        with m.Case(3):
            m.d.comb += out.eq(value + (value << 1))
    return out


def ratio_of(m, mode, sparsity: dict, *, name: str):
    """A signal: R = m / n of ``mode``'s pattern (1 if dense)."""
    out = Signal(range(MAX_RATIO + 1), name=name)
    m.d.comb += out.eq(1)
    for code, (n_p, m_p) in sparsity.items():
        with m.If(mode == code):
            m.d.comb += out.eq(m_p // n_p)
    return out


def slots_of(m, k, mode, sparsity: dict, *, name: str):
    """A signal: the stationary rows of a tile of K = ``k`` rows in ``mode`` (0: dense, K;
    a pattern n:m: ``(K div m)·n + min(n, K mod m)``, ``golden.sparse.Pattern.slots``). ``k``
    must be below 1024 (K div 12 is (K div 4) div 3)."""
    assert len(k) <= 10
    out = Signal(len(k), name=name)
    m.d.comb += out.eq(k)
    for code, (n_p, m_p) in sparsity.items():
        quarter = k >> 2
        q = _div3(m, quarter, f"{name}_q{code}") if m_p == 12 else k >> (m_p.bit_length() - 1)
        r = Signal(range(m_p), name=f"{name}_r{code}")
        m.d.comb += r.eq(k - q * m_p)
        with m.If(mode == code):
            m.d.comb += out.eq(q * n_p + Mux(r > n_p, Const(n_p), r))
    return out
