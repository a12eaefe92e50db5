"""The processing element of the weight-stationary systolic array, and a column of them.

Dataflow (docs/contract.md §2): a PE at row k, column m holds the stationary weight a[k, m].
Moving data b[k, f] enters row k from the left and passes one PE to the right per cycle;
partial sums flow down a column, each PE adding its product: ``s = s + a[k, m] * b[k, f]``,
k in PE-row order, exactly as the numerics contract orders the adds.
"""

from amaranth.hdl import Array, Const, Module, Mux, Signal
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from .formats import Fmt, parse_formats
from .fp32_add import FP32_ADD_MAX_STAGES, Fp32Adder
from .fp_mul import FP_MUL_MAX_CUTS, OPERAND_ZERO, FpProduct, Operand, OperandDecoder, split_stages
from .params import check_int
from .pipeline import delay

__all__ = ["Weight", "Moving", "weight_layout", "moving_layout", "decoded_weight_layout",
           "decoded_moving_layout", "PE", "PEColumn", "DEFAULT_MUL_STAGES", "DEFAULT_ADD_STAGES"]

#: Default pipeline depths of the PE's multiplier and adder, shared by the systolic array, the
#: tensor engine and the core. Chosen by place-and-route (synth/fpga.py, ECP5-85F speed 6, seed
#: 1): a PE and a two-PE column both run above 115 MHz. Every register boundary of the adder at
#: this depth, including its output, is crossed once per cycle, so a column of PEs chains
#: register to register and keeps the PE's clock rate.
DEFAULT_MUL_STAGES = 5
DEFAULT_ADD_STAGES = 6


class Weight(data.Struct):
    """A stationary weight: 16 bits of operand (fp8 in the low 8) and its format tag."""

    data: 16
    fmt: Fmt


class Moving(data.Struct):
    """A moving operand: 16 bits (fp8 in the low 8), its format tag, and the ``swap`` and
    ``pad`` flags.

    ``swap`` marks the first operand of a new stationary tile: the PE it reaches switches to its
    shadow weight before multiplying it. Travelling with the data, the switch sweeps through the
    array on the same skewed wavefront as the moving tile, so no PE changes weights early.
    ``pad`` (read only with ``swap``) says the operand's row lies beyond the new tile's rows:
    the PE's new weight is then +0, whatever its shadow weight holds, so a tile of k < n rows
    needs no padding rows loaded.
    """

    data: 16
    fmt: Fmt
    swap: 1
    pad: 1


def weight_layout(window: int = 1):
    """A stationary weight of a PE whose operand is a ``window`` of values: :class:`Weight`
    for 1; else :class:`Weight`'s fields and ``sel``, the window's value it multiplies (from
    a sparse tile's tag)."""
    if window == 1:
        return Weight
    return data.StructLayout({"data": 16, "fmt": Fmt, "sel": range(window)})


def moving_layout(window: int = 1):
    """A moving operand: :class:`Moving` for ``window`` 1; else :class:`Moving`'s fields with
    ``data`` a window of ``window`` values (the rows a sparse tile's weight may pick)."""
    if window == 1:
        return Moving
    return data.StructLayout({"data": data.ArrayLayout(16, window), "fmt": Fmt, "swap": 1,
                              "pad": 1})


def decoded_weight_layout(window: int = 1) -> data.StructLayout:
    """A PE's stationary weight: ``op``, the weight decoded (:class:`~hdl.fp_mul.Operand`),
    and for a ``window`` above 1 ``sel`` (as in :func:`weight_layout`)."""
    fields = {"op": Operand}
    if window > 1:
        fields["sel"] = range(window)
    return data.StructLayout(fields)


def decoded_moving_layout(window: int = 1) -> data.StructLayout:
    """A PE's moving operand: ``op``, the operand decoded (a window of ``window`` of them
    above 1), and :class:`Moving`'s ``swap`` and ``pad`` flags."""
    op = Operand if window == 1 else data.ArrayLayout(Operand, window)
    return data.StructLayout({"op": op, "swap": 1, "pad": 1})


def _zero_moving(window: int) -> dict:
    """The initial value of a register of :func:`decoded_moving_layout`: +0 operands (all-zero
    bits would be no valid operand: finite, significand 0)."""
    return {"op": OPERAND_ZERO if window == 1 else [OPERAND_ZERO] * window}


def decode_moving(m, moving, *, window: int = 1, formats, name: str):
    """``moving`` (:func:`moving_layout` of ``window``) with its value(s) decoded: a
    :func:`decoded_moving_layout` signal, driven by one :class:`~hdl.fp_mul.OperandDecoder`
    (for ``formats``) per value, added to ``m`` as ``{name}_dec`` (``{name}_dec{i}`` in a
    window)."""
    # The initial value passes to the registers that delay this signal (Signal.like).
    out = Signal(decoded_moving_layout(window), name=name, init=_zero_moving(window))
    pairs = ([(moving.data, out.op)] if window == 1
             else [(moving.data[i], out.op[i]) for i in range(window)])
    for i, (value, op) in enumerate(pairs):
        dec = OperandDecoder(formats=formats)
        m.submodules[f"{name}_dec" if window == 1 else f"{name}_dec{i}"] = dec
        m.d.comb += [dec.raw.eq(value), dec.fmt.eq(moving.fmt), op.eq(dec.op)]
    m.d.comb += [out.swap.eq(moving.swap), out.pad.eq(moving.pad)]
    return out


def decode_weight(m, weight, *, window: int = 1, formats, name: str):
    """``weight`` (:func:`weight_layout` of ``window``) decoded: a
    :func:`decoded_weight_layout` signal, driven by an :class:`~hdl.fp_mul.OperandDecoder`
    added to ``m`` as ``{name}_dec``."""
    out = Signal(decoded_weight_layout(window), name=name, init={"op": OPERAND_ZERO})
    m.submodules[f"{name}_dec"] = dec = OperandDecoder(formats=formats)
    m.d.comb += [dec.raw.eq(weight.data), dec.fmt.eq(weight.fmt), out.op.eq(dec.op)]
    if window > 1:
        m.d.comb += out.sel.eq(weight.sel)
    return out


class PE(wiring.Component):
    """One processing element: ``psum_out = psum_in + w * x`` with a double-buffered weight.

    With the default pipeline depths the product takes 5 cycles and the sum 6, and
    ``psum_out`` comes straight from a register (the adder's last stage registers its rounded
    result), so PEs chain register to register.

    The operands arrive decoded (:class:`~hdl.fp_mul.Operand`: flags, exponent, normalised
    significand): the array decodes each weight and each moving operand once at its edge
    (:class:`~hdl.fp_mul.OperandDecoder`, one per column and one per row), and the PEs pass the
    decoded form on. So a PE holds no format logic: every format the decoders are built for
    goes through the same PE.

    Ports and timing (all registers advance only on cycles with ``en`` = 1, except the shadow
    weight, which loads whenever ``w_shift`` = 1: the driver decides when, :class:`PEColumn`
    also while the column stalls; :class:`~hdl.systolic.SystolicArray` only with ``en``):

    * ``w_in`` / ``w_shift``: with ``w_shift`` the shadow weight takes ``w_in`` at the clock
      edge (a ``swap`` operand in the same cycle still meets the old shadow weight). ``w_out``
      always shows the shadow weight, for a chain of PEs (:class:`PEColumn`). Before any load
      the shadow and active weights are +0.
    * ``x_in`` / ``x_out``: the moving operand, passed right through one register.
      ``x_in.swap`` first copies the shadow weight into the active one (the operand is
      multiplied by the new weight); with ``x_in.pad`` too, +0 becomes the active weight
      instead.
    * ``psum_in`` / ``psum_out``: the partial sum. ``psum_in`` must arrive ``mul_stages`` cycles
      after the ``x_in`` it goes with; ``psum_out`` follows ``psum_in`` by ``add_stages``
      cycles. So in a column the operand for row k + 1 is presented ``add_stages`` cycles after
      the one for row k (:attr:`row_skew`). From ``x_in`` to ``psum_out``: ``mul_stages +
      add_stages`` cycles (11 with the defaults).

    Numerics: the product is :class:`~hdl.fp_mul.FpProduct`'s (the operands' fp32 values
    multiplied, fp32 RNE), the sum :class:`~hdl.fp32_add.Fp32Adder`'s (IEEE binary32 RNE,
    subnormals kept, canonical NaN 0x7FC00000). Throughput: one multiply-accumulate per enabled
    cycle.

    Parameters
    ----------
    mul_stages : int
        The multiplier's pipeline depth, 0 to :data:`~hdl.fp_mul.FP_MUL_MAX_CUTS` (default 5),
        counted as :class:`~hdl.fp_mul.FpMultiplier` counts it: from 3 on the first is the
        register of the operands (the PE's ``x_out`` and active weight serve as it).
    add_stages : int
        The :class:`~hdl.fp32_add.Fp32Adder`'s pipeline depth, 0 to
        :data:`~hdl.fp32_add.FP32_ADD_MAX_STAGES` (default 6).
    window : int
        Values in a moving operand, 1 to 16 (default 1): with more (a sparse engine's PE,
        :func:`decoded_moving_layout`), the weight's ``sel`` picks the one it multiplies.

    Raises
    ------
    TypeError
        If ``mul_stages``, ``add_stages`` or ``window`` is not an integer.
    ValueError
        If ``mul_stages``, ``add_stages`` or ``window`` is out of range.
    """

    def __init__(self, *, mul_stages: int = DEFAULT_MUL_STAGES,
                 add_stages: int = DEFAULT_ADD_STAGES, window: int = 1):
        self.mul_stages = check_int("mul_stages", mul_stages, lo=0, hi=FP_MUL_MAX_CUTS)
        self.add_stages = check_int("add_stages", add_stages, lo=0, hi=FP32_ADD_MAX_STAGES)
        self.window = check_int("window", window, lo=1, hi=16)
        self.row_skew = self.add_stages
        wl, ml = decoded_weight_layout(self.window), decoded_moving_layout(self.window)
        super().__init__({
            "en": In(1),
            "w_shift": In(1),
            "w_in": In(wl),
            "w_out": Out(wl),
            "x_in": In(ml),
            "x_out": Out(ml, init=_zero_moving(self.window)),
            "psum_in": In(32),
            "psum_out": Out(32),
        })

    def elaborate(self, platform):
        # Design note: the multiplier's first register stage (from 3 stages on) is the one of
        # its decoded operands; here that is the PE's own registers, the active weight (which
        # takes the new weight on a swap, so after the edge it is the weight the operand met)
        # and x_out. So a PE spends no flip-flops and no logic on that stage in a dense array.
        m = Module()
        operand_cut, product_stages = split_stages(self.mul_stages)
        m.submodules.mul = mul = FpProduct(stages=product_stages)
        m.submodules.add = add = Fp32Adder(stages=self.add_stages)

        wl = decoded_weight_layout(self.window)
        shadow = Signal(wl, init={"op": OPERAND_ZERO})
        active = Signal(wl, init={"op": OPERAND_ZERO})
        with m.If(self.w_shift):
            m.d.sync += shadow.eq(self.w_in)
        m.d.comb += self.w_out.eq(shadow)

        # The weight this operand meets: the shadow one (or +0, in a padding row) if it starts
        # a new tile.
        incoming = Signal(wl)
        m.d.comb += incoming.op.eq(Mux(self.x_in.pad, Operand.const(OPERAND_ZERO), shadow.op))
        if self.window > 1:
            m.d.comb += incoming.sel.eq(Mux(self.x_in.pad, 0, shadow.sel))
        weight = Signal(wl)
        m.d.comb += weight.eq(Mux(self.x_in.swap, incoming, active))
        with m.If(self.en):
            m.d.sync += self.x_out.eq(self.x_in)
            with m.If(self.x_in.swap):
                m.d.sync += active.eq(incoming)

        if self.window > 1:
            # A sparse tile's weight multiplies the window's value its tag picked.
            operand = Signal(Operand)
            m.d.comb += operand.eq(Array(self.x_in.op[i] for i in range(self.window))
                                   [weight.sel])
            operand = delay(m, operand, operand_cut, name="b_op", en=self.en)
        else:
            operand = self.x_out.op if operand_cut else self.x_in.op
        m.d.comb += [
            mul.en.eq(self.en),
            mul.a_op.eq(active.op if operand_cut else weight.op),
            mul.b_op.eq(operand),
            add.en.eq(self.en),
            # psum_in is the left operand: s = s + w*x, the contract's order.
            add.a.eq(self.psum_in),
            add.b.eq(mul.result),
            self.psum_out.eq(add.result),
        ]
        return m


class PEColumn(wiring.Component):
    """A column of ``rows`` PEs computing one dot product per cycle: ``+0 + w[0]*x[0] + ...``.

    This is one column of the systolic array with the input skew built in, so a whole vector
    enters at once. Used by ``nclite pe-chain`` (dot products through one column, checked
    against golden) and as the PE-chain benchmark.

    * Weights load through ``w_in`` with ``w_shift``: after ``rows`` shifts the first weight
      shifted sits in the last row (PE k holds the weight shifted in at shift ``rows - 1 - k``).
    * ``x`` (one operand per row, decoded at the column's edge; format and ``swap`` from
      ``x_fmt``/``x_swap`` for the whole vector) enters on each cycle with ``en`` = 1.
      ``x_swap`` on a vector makes it (and the vectors after it) use the weights loaded since
      the previous swap.
    * ``result`` shows, :attr:`latency` = ``mul_stages + rows * add_stages`` enabled cycles
      later (5 + 6 · rows with the default stages, as :class:`PE`), the fp32 dot product in
      the contract's order (k = 0 first, starting from +0.0). Throughput: one dot product
      (``rows`` MACs) per enabled cycle.

    Parameters
    ----------
    rows : int
        PEs in the column, 1 to 256.
    mul_stages, add_stages
        As :class:`PE`'s, for every PE.
    formats : collection of :class:`~hdl.formats.Fmt` or names
        The formats the column's operand decoders read (default: all three): one decoder for
        the weights at the top, one per row for ``x``.

    Raises
    ------
    TypeError
        If ``rows``, ``mul_stages`` or ``add_stages`` is not an integer; if ``formats`` is not
        a collection.
    ValueError
        If ``rows``, ``mul_stages`` or ``add_stages`` is out of range; if ``formats`` is empty
        or names an unknown format.
    """

    def __init__(self, *, rows: int, mul_stages: int = DEFAULT_MUL_STAGES,
                 add_stages: int = DEFAULT_ADD_STAGES, formats=("bf16", "fp8_e4m3", "fp8_e5m2")):
        self.rows = check_int("rows", rows, lo=1, hi=256)
        self.pe_params = dict(
            mul_stages=check_int("mul_stages", mul_stages, lo=0, hi=FP_MUL_MAX_CUTS),
            add_stages=check_int("add_stages", add_stages, lo=0, hi=FP32_ADD_MAX_STAGES))
        self.formats = parse_formats(formats, param="formats")
        self.row_skew = add_stages  # = PE.row_skew
        self.latency = mul_stages + rows * add_stages
        super().__init__({
            "en": In(1),
            "w_shift": In(1),
            "w_in": In(Weight),
            "x": In(data.ArrayLayout(16, rows)),
            "x_fmt": In(Fmt),
            "x_swap": In(1),
            "result": Out(32),
        })

    def elaborate(self, platform):
        # lab2 hide begin: pe_column
        m = Module()
        pes = [PE(**self.pe_params) for _ in range(self.rows)]
        w_top = decode_weight(m, self.w_in, formats=self.formats, name="w_top")
        for k, pe in enumerate(pes):
            m.submodules[f"pe{k}"] = pe
            m.d.comb += [pe.en.eq(self.en), pe.w_shift.eq(self.w_shift)]
            # Row k's operand, decoded, is delayed k * row_skew enabled cycles, so that it meets
            # the partial sum coming down from row k - 1 (the systolic skew, inside the column).
            operand = Signal(Moving, name=f"x_raw{k}")
            m.d.comb += [operand.data.eq(self.x[k]), operand.fmt.eq(self.x_fmt),
                         operand.swap.eq(self.x_swap)]
            decoded = decode_moving(m, operand, formats=self.formats, name=f"x_row{k}")
            m.d.comb += pe.x_in.eq(delay(m, decoded, k * self.row_skew, name=f"x_row{k}",
                                         en=self.en))
            m.d.comb += pe.w_in.eq(w_top if k == 0 else pes[k - 1].w_out)
            m.d.comb += pe.psum_in.eq(Const(0, 32) if k == 0 else pes[k - 1].psum_out)
        m.d.comb += self.result.eq(pes[-1].psum_out)
        return m
        # lab2 hide end: pe_column
