"""The N×N weight-stationary systolic array (without its controller and PSUM)."""

from amaranth.hdl import Module
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from .formats import parse_formats
from .fp32_add import FP32_ADD_MAX_STAGES
from .fp_mul import FP_MUL_MAX_CUTS
from .params import check_int
from .pe import DEFAULT_ADD_STAGES, DEFAULT_MUL_STAGES, PE, Moving, Weight
from .pipeline import delay

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
      :attr:`hdl.pe.PE.row_skew`).
    * ``result``: the fp32 sums of all ``n`` columns for that moving column, together (a
      delay line per column undoes the column skew), :attr:`latency` cycles after its
      ``x_in``: ``latency = n · add_stages + mul_stages + n − 1`` (7n + 4 with the default 5
      multiplier and 6 adder stages of :class:`~hdl.pe.PE`).
      Throughput: one moving column (``n²`` MACs) per cycle.
    * ``w_in`` / ``w_shift``: the weight-load chains feed the **bottom** row and shift up, one
      row per ``w_shift`` (independent of ``en``), into the PEs' shadow weights. After ``n``
      shifts the first row shifted is in row 0. A ``swap`` operand (``x_in[k].swap``) makes
      each PE copy its shadow weight into the active one as the operand reaches it; shifts must
      not overlap the swap wavefront (the swap travels with its operand, through the skew) —
      :class:`~hdl.tensor_engine.TensorEngine` ensures that.
    * ``en``: clock enable of everything but the weight shift.

    Parameters
    ----------
    n : int
        The array size, 1 to 128.
    mul_stages, add_stages, formats
        As :class:`~hdl.pe.PE`'s, for every PE.

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
                 add_stages: int = DEFAULT_ADD_STAGES, formats=("bf16", "fp8_e4m3", "fp8_e5m2")):
        self.n = check_array_size(n)
        self.mul_stages = check_int("mul_stages", mul_stages, lo=0, hi=FP_MUL_MAX_CUTS)
        self.add_stages = check_int("add_stages", add_stages, lo=0, hi=FP32_ADD_MAX_STAGES)
        self.formats = parse_formats(formats, param="formats")
        self.latency = n * add_stages + mul_stages + n - 1
        super().__init__({
            "en": In(1),
            "w_shift": In(1),
            "w_in": In(data.ArrayLayout(Weight, n)),
            "x_in": In(data.ArrayLayout(Moving, n)),
            "result": Out(data.ArrayLayout(32, n)),
        })

    def elaborate(self, platform):
        m = Module()
        n = self.n
        pes = [[PE(mul_stages=self.mul_stages, add_stages=self.add_stages, formats=self.formats)
                for _ in range(n)] for _ in range(n)]
        # lab2 begin: dataflow
        for k in range(n):
            # The input skew: row k's operand waits k * add_stages cycles, so that the partial
            # sum of PE (k - 1, 0) reaches PE (k, 0) mul_stages cycles after it, as a PE wants.
            row_in = delay(m, self.x_in[k], k * self.add_stages, name=f"x_row{k}", en=self.en)
            for col in range(n):
                pe = pes[k][col]
                m.submodules[f"pe_{k}_{col}"] = pe
                m.d.comb += [
                    pe.en.eq(self.en),
                    pe.w_shift.eq(self.w_shift),
                    pe.x_in.eq(row_in if col == 0 else pes[k][col - 1].x_out),
                    pe.w_in.eq(self.w_in[col] if k == n - 1 else pes[k + 1][col].w_out),
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
