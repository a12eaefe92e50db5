"""The N×N weight-stationary systolic array (without its controller and PSUM)."""

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from .formats import parse_formats
from .fp32_add import FP32_ADD_MAX_STAGES
from .fp_mul import FP_MUL_MAX_CUTS
from .instances import shared
from .params import check_int
from .pe import (
    DEFAULT_ADD_STAGES,
    DEFAULT_MUL_STAGES,
    PE,
    Moving,
    decode_moving,
    decode_weight,
    decoded_weight_layout,
    moving_layout,
    weight_layout,
)
from .pipeline import delay
from .sparsity import moving_rows, parse_sparsity, sparse_column_layout, window

__all__ = ["SystolicArray", "check_array_size"]


def check_array_size(n) -> int:
    """``n``, the array size: 1 to 128 (:func:`~hdl.params.check_int`'s errors)."""
    return check_int("n", n, lo=1, hi=128)


class SystolicArray(wiring.Component):
    """``n`` × ``n`` :class:`~hdl.pe.PE` s: stationary weights, moving operands, fp32 sums.

    PE (k, m) sits in row k, column m. Moving operand k (``x_in[k]``) enters row k and moves one
    column right per cycle; partial sums move down; column m's bottom PE yields
    ``+0 + w[0,m]·x[0] + w[1,m]·x[1] + ...`` in row order (the contract's order).

    * ``x_in``: one operand per row, all of one moving column at once (unskewed). The array
      skews the rows itself (a delay line per row, the systolic skew; see
      :attr:`hdl.pe.PE.row_skew`). The operand presented in cycle t reaches PE (k, m) in
      cycle ``t + k·add_stages + m``.
    * ``result``: the fp32 sums of all ``n`` columns for that moving column, together (a
      delay line per column undoes the column skew), :attr:`latency` cycles after its
      ``x_in``: ``latency = n · add_stages + mul_stages + n − 1`` (7n + 4 with the default 5
      multiplier and 6 adder stages of :class:`~hdl.pe.PE`).
      Throughput: one moving column (``n²`` MACs) per cycle.
    * ``w_valid`` / ``w_row`` / ``w_in``: one row of a stationary tile (row ``w_row``, lane m
      its column m) per cycle, into the PEs' shadow weights. Lane m waits m cycles (the column
      skew) and then travels down column m, :attr:`w_hop` cycles per row; PE (k, m) takes the
      row tagged k as it passes. So row k presented in cycle e is in PE (k, m)'s shadow weight
      from cycle ``e + m + k·w_hop + 1`` on: just ahead of the swap wavefront, which goes down
      ``add_stages`` cycles per row.
    * A ``swap`` operand (``x_in[k].swap``) makes each PE take its shadow weight (or +0 where
      ``x_in[k].pad``) as its active one as the operand reaches it. **Background load rule**:
      with ``δ = min(add_stages, 1)``, a swap operand presented in cycle t uses row k presented
      in cycle e if ``e ≤ t − 1 + k·δ``, and a row k presented in cycle e leaves the tile of an
      earlier swap operand (presented in cycle t0) alone if ``e ≥ t0 + k·δ``. Rows presented in
      order, one per cycle at most, the first in or after the cycle of the previous swap
      operand and the last before the new one's, meet both.
      :class:`~hdl.tensor_engine.TensorEngine` loads that way: a tile loads while the previous
      one computes and needs nothing but its own k cycles.
    * ``en``: clock enable of everything (rows presented while ``en`` = 0 are ignored; cycles
      above count enabled cycles).

    Parameters
    ----------
    n : int
        The array size, 1 to 128.
    mul_stages, add_stages
        As :class:`~hdl.pe.PE`'s, for every PE.
    formats : collection of :class:`~hdl.formats.Fmt` or names
        The formats the array's operand decoders read (default: all three): one
        :class:`~hdl.fp_mul.OperandDecoder` per row for the moving operands (W per row in a
        sparse array), one per column for the weights; the PEs take decoded operands.

    Raises
    ------
    TypeError
        If ``n``, ``mul_stages`` or ``add_stages`` is not an integer; if ``formats`` is not a
        collection.
    ValueError
        If ``n``, ``mul_stages`` or ``add_stages`` is out of range; if ``formats`` is empty or
        names an unknown format.
    """

    def __init__(self, *, n: int, mul_stages: int = DEFAULT_MUL_STAGES,
                 add_stages: int = DEFAULT_ADD_STAGES, formats=("bf16", "fp8_e4m3", "fp8_e5m2"),
                 sparsity=()):
        self.n = check_array_size(n)
        self.mul_stages = check_int("mul_stages", mul_stages, lo=0, hi=FP_MUL_MAX_CUTS)
        self.add_stages = check_int("add_stages", add_stages, lo=0, hi=FP32_ADD_MAX_STAGES)
        self.formats = parse_formats(formats, param="formats")
        self.sparsity = parse_sparsity(sparsity, param="sparsity")
        self.latency = n * add_stages + mul_stages + n - 1
        #: Cycles a weight row takes from one PE row to the next: one less than the swap
        #: wavefront's ``add_stages`` (none if that is 0), so the loads run just ahead of it.
        self.w_hop = max(add_stages - 1, 0)
        #: Values of a PE's moving operand: 1, or a sparse engine's window (:func:`window`).
        self.window = window(self.sparsity)
        #: Rows of K a moving column holds: n, or up to R·n in a sparse engine.
        self.moving_rows = moving_rows(n, self.sparsity)
        x_layout = (data.ArrayLayout(Moving, n) if not self.sparsity
                    else sparse_column_layout(n, self.sparsity))
        super().__init__({
            "en": In(1),
            "w_valid": In(1),
            "w_row": In(range(max(n, 2))),
            "w_in": In(data.ArrayLayout(weight_layout(self.window), n)),
            "x_in": In(x_layout),
            "result": Out(data.ArrayLayout(32, n)),
        })

    def _sparse_rows(self, m):
        """The operand window of each PE row, from a sparse engine's moving column.

        Design note: one delay line carries the whole column (R·n values) down the rows, and
        row k taps it after ``k · add_stages`` cycles (the systolic skew) and takes the W
        values its slot may pick: slot k is slot ``j = k mod n_p`` of group ``g = k div n_p``
        of pattern n_p:m_p, so its row of K is ``g·m_p + tag`` with ``j <= tag <= j + m_p -
        n_p`` (tags increase in a group), and the window starts at ``g·m_p + j`` (``sel`` =
        tag − j). A dense tile's row k takes value k (sel 0). One line instead of a skew per
        row: (n − 1)·add_stages stages of R·n values, not ~n²/2·add_stages of W values.
        Rows at or past the tile's ``slots`` (padding: their weight is +0) get +0 operands,
        so that no inf or NaN of the column meets them. Each row's window is decoded there
        (W :class:`~hdl.fp_mul.OperandDecoder` s a row), after the taps: the line carries the
        narrower raw values.
        """
        # lab2 hide begin: sparse_rows
        n, w = self.n, self.window
        rows = []
        tap = self.x_in
        lanes = self.moving_rows
        for k in range(n):
            if k:
                tap = delay(m, tap, self.add_stages, name=f"x_tap{k}", en=self.en)
            row = Signal(moving_layout(w), name=f"x_row{k}")
            # The window in a signal of its own: were the switch to drive some of row's bits
            # and plain assignments the others, Yosys would write the others as `always @*`
            # blocks that a 4-state simulator never runs when their inputs keep their initial
            # values (X until the first change; tests/hdl/test_x_safety_rtl.py).
            window = Signal(row.data.shape(), name=f"x_window{k}")
            pad = tap.slots <= k
            m.d.comb += [row.data.eq(window), row.fmt.eq(tap.fmt), row.swap.eq(tap.swap),
                         row.pad.eq(pad)]
            with m.Switch(tap.mode):
                for code, (n_p, m_p) in [(0, (1, 1)), *self.sparsity.items()]:
                    base = (k // n_p) * m_p + k % n_p
                    with m.Case(code):
                        for i in range(w):
                            value = tap.data[base + i] if base + i < lanes else 0
                            m.d.comb += window[i].eq(Mux(pad, 0, value))
            rows.append(decode_moving(m, row, window=w, formats=self.formats,
                                      name=f"x_op{k}"))
        return rows
        # lab2 hide end: sparse_rows

    def _weight_taps(self, m):
        """Per PE (k, m): the weight row passing it, as a ``(load, weight)`` pair of values.

        Design note: the tile's rows do not shift through the PEs' shadow registers (a PE's
        shadow weight would then change before the previous tile's swap reached it); each
        column's lane travels down its own delay line instead, tagged with its row, and only
        the PE of that row keeps it. The line is ``w_hop`` = max(``add_stages`` − 1, 0)
        registers per row, one cycle a row faster than the swap wavefront (as fast when
        ``add_stages`` is 0): a row presented in order after the previous swap operand stays
        behind that swap at every PE, and ahead of the next one.
        """
        n = self.n
        lane = data.StructLayout({"valid": 1, "row": range(max(n, 2)),
                                  "weight": decoded_weight_layout(self.window)})
        taps = [[None] * n for _ in range(n)]
        for col in range(n):
            entry = Signal(lane, name=f"w_lane{col}")
            weight = decode_weight(m, self.w_in[col], window=self.window, formats=self.formats,
                                   name=f"w_top{col}")
            m.d.comb += [entry.valid.eq(self.w_valid & self.en), entry.row.eq(self.w_row),
                         entry.weight.eq(weight)]
            tap = delay(m, entry, col, name=f"w_skew{col}", en=self.en)
            for k in range(n):
                if k:
                    tap = delay(m, tap, self.w_hop, name=f"w_down{k}_{col}", en=self.en)
                # Loads on enabled cycles only: while en is low a tap already shows the
                # row of the next enabled cycle, too early for the PE.
                taps[k][col] = (tap.valid & (tap.row == k) & self.en, tap.weight)
        return taps

    def elaborate(self, platform):
        m = Module()
        n = self.n
        # In simulation builds the PEs are one Verilog module (hdl.instances).
        pe_params = {"mul_stages": self.mul_stages, "add_stages": self.add_stages}
        if self.window > 1:
            pe_params["window"] = self.window
        pes = [[shared(PE(**pe_params), "hdl.pe:PE", pe_params) for _ in range(n)]
               for _ in range(n)]
        taps = self._weight_taps(m)
        sparse_rows = self._sparse_rows(m) if self.sparsity else None
        # Each row's operand decoded once, at the array's edge (before its skew).
        operands = [decode_moving(m, self.x_in[k], formats=self.formats, name=f"x_op{k}")
                    for k in range(n)] if not self.sparsity else None
        # lab2 begin: dataflow
        for k in range(n):
            # The input skew: row k's operand waits k * add_stages cycles, so that the partial
            # sum of PE (k - 1, 0) reaches PE (k, 0) mul_stages cycles after it, as a PE wants.
            if sparse_rows:
                row_in = sparse_rows[k]  # skewed already
            else:
                row_in = delay(m, operands[k], k * self.add_stages, name=f"x_row{k}",
                               en=self.en)
            for col in range(n):
                pe = pes[k][col]
                load, weight = taps[k][col]
                m.submodules[f"pe_{k}_{col}"] = pe
                m.d.comb += [
                    pe.en.eq(self.en),
                    pe.w_shift.eq(load),
                    pe.w_in.eq(weight),
                    pe.x_in.eq(row_in if col == 0 else pes[k][col - 1].x_out),
                    pe.psum_in.eq(0 if k == 0 else pes[k - 1][col].psum_out),
                ]
        # The output deskew: column col's sums leave col cycles after column 0's (the operand
        # moves one PE right per cycle), so column col waits n - 1 - col cycles more.
        for col in range(n):
            out = delay(m, pes[n - 1][col].psum_out, n - 1 - col, name=f"sum_col{col}",
                        en=self.en)
            m.d.comb += self.result[col].eq(out)
        # lab2 end: dataflow
        return m
