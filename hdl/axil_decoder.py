"""An AXI4-Lite address decoder: one master, several slaves at fixed address windows."""

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .cmdqueue import AxiLiteSignature
from .params import check_int

__all__ = ["AxiLiteDecoder"]

_DECERR = 0b11


class AxiLiteDecoder(wiring.Component):
    """Routes each AXI4-Lite access on ``bus`` to the window holding its address.

    ``windows`` is a list of ``(base, size)``: window ``i`` is the slave on port ``sub<i>``
    (also ``subs[i]``), a master port whose address is the offset in the window (``base``
    subtracted), ``log2(size)`` bits wide. An access outside every window is answered by the
    decoder itself: DECERR, reads return 0, the write data is taken and dropped. A window's
    own responses (including its errors) pass through unchanged; ``awprot`` / ``arprot``
    are forwarded.

    One transaction at a time: an AR or AW is taken (the address registered and decoded)
    only when the previous access has been answered; when both wait, reads and writes take
    turns. The address goes out to the window the cycle after it was taken; W, B and R pass
    through combinationally (W is taken only after AW, whatever order the master sends them
    in). An access costs one cycle more than the window's own latency, plus one idle cycle
    after its response.

    Parameters
    ----------
    addr_width : int
        Bits of ``bus``'s byte address, 2 to 64 (default 32).
    windows : list of (int, int)
        ``(base, size)`` of each window: at least one; sizes powers of two, at least 4; each
        base aligned to its size; inside the address space; no two overlapping.

    Raises
    ------
    TypeError
        If ``addr_width`` is not an integer; if ``windows`` is not a list of pairs, or a base
        or size is not an integer.
    ValueError
        If ``addr_width`` is out of range; if ``windows`` is empty, or a window breaks one of
        the rules above.
    """

    def __init__(self, *, addr_width: int = 32, windows):
        check_int("addr_width", addr_width, lo=2, hi=64)
        try:
            windows = [(base, size) for base, size in windows]
        except (TypeError, ValueError):
            raise TypeError(f"windows must be a list of (base, size) pairs, not {windows!r}") \
                from None
        if not windows:
            raise ValueError("windows must hold at least one (base, size) pair")
        for base, size in windows:
            for v in (base, size):
                if not isinstance(v, int) or isinstance(v, bool):
                    raise TypeError(f"windows: base and size must be integers, not "
                                    f"{(base, size)!r}")
            if size < 4 or size & (size - 1):
                raise ValueError(f"windows: size 0x{size:x} of window at 0x{base:x} is not a "
                                 f"power of two of at least 4")
            if base < 0 or base % size:
                raise ValueError(f"windows: base 0x{base:x} is not aligned to its size 0x{size:x}")
            if base + size > 1 << addr_width:
                raise ValueError(f"windows: window 0x{base:x}+0x{size:x} does not fit in "
                                 f"addr_width {addr_width}")
        for i, (b0, s0) in enumerate(windows):
            for b1, s1 in windows[i + 1:]:
                if b0 < b1 + s1 and b1 < b0 + s0:
                    raise ValueError(f"windows: 0x{b0:x}+0x{s0:x} and 0x{b1:x}+0x{s1:x} overlap")
        self.addr_width, self.windows = addr_width, windows
        members = {"bus": Out(AxiLiteSignature(addr_width=addr_width))}
        for i, (_, size) in enumerate(windows):
            members[f"sub{i}"] = In(AxiLiteSignature(addr_width=size.bit_length() - 1))
        super().__init__(members)
        self.subs = [getattr(self, f"sub{i}") for i in range(len(windows))]

    def _decode(self, addr):
        """One bit per window: whether ``addr`` lies in it."""
        hits = []
        for base, size in self.windows:
            k = size.bit_length() - 1
            hits.append(addr[k:] == (base >> k) if k < self.addr_width else Const(1))
        return Cat(*hits)

    def elaborate(self, platform):
        m = Module()
        bus, subs = self.bus, self.subs
        n = len(subs)
        idle, writing, reading = 0, 1, 2
        state = Signal(2)
        addr = Signal(self.addr_width)
        prot = Signal(3)
        sel = Signal(n)  # one-hot: the window of the access; 0 for a miss
        a_sent, w_sent = Signal(), Signal()
        last_write = Signal()

        is_idle = state == idle
        m.d.comb += [bus.awready.eq(is_idle & (~bus.arvalid | ~last_write)),
                     bus.arready.eq(is_idle & (~bus.awvalid | last_write))]
        with m.If(bus.awvalid & bus.awready):
            m.d.sync += [state.eq(writing), addr.eq(bus.awaddr), prot.eq(bus.awprot),
                         sel.eq(self._decode(bus.awaddr)), last_write.eq(1)]
        with m.Elif(bus.arvalid & bus.arready):
            m.d.sync += [state.eq(reading), addr.eq(bus.araddr), prot.eq(bus.arprot),
                         sel.eq(self._decode(bus.araddr)), last_write.eq(0)]

        hit = sel.any()
        is_writing, is_reading = state == writing, state == reading
        sub_wready = Signal()
        sub_b = Signal(3)  # the selected window's bvalid, bresp
        sub_r = Signal(35)  # the selected window's rvalid, rresp, rdata
        for i, sub in enumerate(subs):
            k = len(sub.awaddr)
            mine = sel[i]
            m.d.comb += [
                sub.awaddr.eq(addr[:k]), sub.awprot.eq(prot),
                sub.awvalid.eq(is_writing & mine & ~a_sent),
                sub.wdata.eq(bus.wdata), sub.wstrb.eq(bus.wstrb),
                sub.wvalid.eq(is_writing & mine & ~w_sent & bus.wvalid),
                sub.bready.eq(is_writing & mine & bus.bready),
                sub.araddr.eq(addr[:k]), sub.arprot.eq(prot),
                sub.arvalid.eq(is_reading & mine & ~a_sent),
                sub.rready.eq(is_reading & mine & bus.rready),
            ]
            with m.If(mine):
                m.d.comb += [sub_wready.eq(sub.wready), sub_b.eq(Cat(sub.bvalid, sub.bresp)),
                             sub_r.eq(Cat(sub.rvalid, sub.rresp, sub.rdata))]
            with m.If((sub.awvalid & sub.awready) | (sub.arvalid & sub.arready)):
                m.d.sync += a_sent.eq(1)

        miss_b = Cat(w_sent, Const(_DECERR, 2))
        miss_r = Cat(Const(1, 1), Const(_DECERR, 2), Const(0, 32))
        b, r = Mux(hit, sub_b, miss_b), Mux(hit, sub_r, miss_r)
        m.d.comb += [
            bus.wready.eq(is_writing & ~w_sent & (sub_wready | ~hit)),
            bus.bvalid.eq(is_writing & b[0]), bus.bresp.eq(b[1:3]),
            bus.rvalid.eq(is_reading & r[0]), bus.rresp.eq(r[1:3]), bus.rdata.eq(r[3:]),
        ]
        with m.If(bus.wvalid & bus.wready):
            m.d.sync += w_sent.eq(1)
        with m.If((bus.bvalid & bus.bready) | (bus.rvalid & bus.rready)):
            m.d.sync += [state.eq(idle), a_sent.eq(0), w_sent.eq(0)]
        return m
