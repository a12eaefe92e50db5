"""Simulation tops: NeuronCores whose DRAM is RTL (:class:`~hdl.axi_mem.AxiMemory`), so that a
whole-core simulation runs without Python on the AXI4 bus.

::

    host (cocotb) --AXI4-Lite--> NeuronCore.axil                 (the registers, unchanged)
    host --batches--> RegisterPlayer --/                         (or the host's accesses played)
                                 NeuronCore.axi --> AxiStalls --> AxiMemory.axi   ("mem")
    testbench <---------------- VPI backdoor ------------------> mem.ram  (the DRAM words)

With cocotbext-axi's ``AxiRam`` as DRAM, Python runs for every beat on every AXI4 channel (and
every cycle on each channel with a pause generator). Here DRAM is the block-RAM memory that the
FPGA board (``hdl.board``) pairs with the core, so the DMA's traffic runs in the simulator
alone. The host's register accesses run Python for every cycle of each (cocotbext-axi's
AXI4-Lite master) unless it plays them: a :class:`~hdl.register_player.RegisterPlayer` beside
the port makes a program's pushes from batches of accesses (``sim.host.core.CoreHost``). The
memory takes one burst at a time (an N-beat burst in N + 2 cycles, ``AxiMemory``), where
``AxiRam`` overlaps them, so a program's cycle count differs a little from an ``AxiRam`` run.

**The backdoor.** The testbench loads and reads DRAM by writing and reading the words of the
memory array ``mem.ram`` (``mem<r>.ram`` in :class:`RingWithDram`) through VPI
(``sim.host.core.MemoryPort``), in zero simulated time. Verilator's models are ports-only, so the
runner must be told that signal: ``sim.runner.run(..., public=top.public)``. Why VPI and not a
backdoor port into the memory's second port, measured on this top (64 KiB of DRAM, of which
the tests compare every byte after each program): through VPI a 32-bit word costs about 2 µs
to read and 3.5 µs to write, in Icarus and in Verilator alike, and no simulated time. A port
costs a clock edge per word (or per few words) on top of the same Python per word: a full
read of the 16 384 words would be 16 384 cycles, seconds in Icarus, longer than the programs
themselves. The price of VPI is one public signal per memory in the Verilator build.

**DRAM stalls without Python.** :class:`AxiStalls` between the core and the memory holds beats
back at random on each of the five channels (a rate and a seed set at run time), as the
pause generators on ``AxiRam`` did, so the DMA still meets a DRAM that stalls. Tests of AXI
errors and of the AXI protocol keep cocotbext-axi's models on ``hdl.core.NeuronCore``.
"""

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .activity import ActivityRecorder
from .axi_mem import AxiMemory
from .cmdqueue import AxiLiteSignature
from .core import NeuronCore
from .dma import AxiSignature, check_data_width
from .multicore import CoreRing
from .params import check_int, check_power_of_two
from .register_player import ACCESS_LAYOUT, RegisterPlayer
from .ring import MAX_LINK_LATENCY
from .sim_batch import _batch_stream

__all__ = ["AxiStalls", "CoreWithDram", "RingWithDram", "AXI_CHANNELS", "core_memories",
           "TRACE_DEPTH", "REGISTER_BATCH"]

#: Entries of each core's :class:`~hdl.activity.ActivityRecorder` in these tops.
TRACE_DEPTH = 512
#: Accesses per batch of each core's :class:`~hdl.register_player.RegisterPlayer`.
REGISTER_BATCH = 64

#: The AXI4 channels in the order of :class:`AxiStalls`' random bytes: (name, the members the
#: sender drives besides valid, whether the master sends).
AXI_CHANNELS = (
    ("aw", ("awid", "awaddr", "awlen", "awsize", "awburst"), True),
    ("w", ("wdata", "wstrb", "wlast"), True),
    ("b", ("bid", "bresp"), False),
    ("ar", ("arid", "araddr", "arlen", "arsize", "arburst"), True),
    ("r", ("rid", "rdata", "rresp", "rlast"), False),
)

_FIXED_STATE = 0x9E37_79B9_7F4A_7C15  # the generator's state for seed 0


def _check_pow2(dram_bytes) -> int:
    return check_power_of_two("dram_bytes", dram_bytes, lo=4,
                              note="(the size of the block-RAM memory standing in for DRAM)")


def _stall_ports(suffix: str = "") -> dict:
    return {f"dram_stall_rate{suffix}": In(8), f"dram_stall_seed{suffix}": In(32),
            f"dram_stalls{suffix}": Out(32), f"trace_enable{suffix}": In(1),
            f"trace_clear{suffix}": In(1),
            f"trace_count{suffix}": Out(range(TRACE_DEPTH + 1)), f"trace_full{suffix}": Out(1)}


def _register_ports(suffix: str = "") -> dict:
    return {f"axil{suffix}": Out(AxiLiteSignature()),
            f"regs{suffix}_batch": In(_batch_stream(ACCESS_LAYOUT, REGISTER_BATCH)),
            f"regs_active{suffix}": Out(1)}


def _attach_registers(m, top, axil, suffix: str, player: RegisterPlayer) -> None:
    """The core's register port ``axil`` answers the top's port ``axil<suffix>`` (the
    testbench's AXI4-Lite master) or the player (fed by ``regs<suffix>_batch``) while the
    player is active. The testbench starts the player only with no access of its own in
    flight, and makes none until it is done: its accesses wait (no ready) meanwhile."""
    outer = getattr(top, f"axil{suffix}")
    wiring.connect(m, wiring.flipped(getattr(top, f"regs{suffix}_batch")), player.batches)
    active = player.active
    m.d.comb += getattr(top, f"regs_active{suffix}").eq(active)
    for name, member in axil.signature.members.items():
        core_side, own, played = (getattr(x, name) for x in (axil, outer, player.bus))
        if member.flow == In:  # the master drives it
            m.d.comb += core_side.eq(Mux(active, played, own))
        elif name.endswith(("valid", "ready")):
            m.d.comb += [own.eq(core_side & ~active), played.eq(core_side & active)]
        else:
            m.d.comb += [own.eq(core_side), played.eq(core_side)]


def _attach_trace(m, top, activity, suffix: str, rec: ActivityRecorder) -> None:
    m.d.comb += [rec.activity.eq(activity), rec.clear.eq(getattr(top, f"trace_clear{suffix}")),
                 rec.enable.eq(getattr(top, f"trace_enable{suffix}")),
                 getattr(top, f"trace_count{suffix}").eq(rec.count),
                 getattr(top, f"trace_full{suffix}").eq(rec.full)]


class AxiStalls(wiring.Component):
    """Random stalls on every channel of an AXI4 link from ``up`` (the master's side) to
    ``down`` (the slave's side); payloads pass through unchanged, combinationally.

    A 64-bit xorshift generator steps every cycle. Byte c of its state (c = 0..4 for AW, W,
    B, AR, R) below ``stall_rate`` stalls channel c in that cycle: a beat its sender offers is
    not passed on (the receiver sees ``valid`` low, the sender ``ready`` low). A beat already
    shown to the receiver stays shown until it is taken, so each side sees a legal AXI4 channel
    whenever the other side is legal (valid held, payload stable). ``stall_rate`` = 0 passes
    every channel straight through, 51 stalls about a fifth of the cycles, 255 nearly all.

    The generator starts from ``seed`` at the first clock edge after reset (seed 0: a fixed
    state), so a testbench sets ``seed`` before it releases reset; ``stall_rate`` may change at
    any time. ``stalled`` counts the cycles in which some channel held back a beat its sender
    offered (wrapping at 2**32), so that a test can check that stalls happened.

    Parameters
    ----------
    addr_width : int
        The AXI4 address bits, 1 to 64 (default 32).
    data_width : int
        The AXI4 data bits, 32, 64, 128 or 256 (default 32).

    Raises
    ------
    TypeError
        If ``addr_width`` or ``data_width`` is not an integer.
    ValueError
        If ``addr_width`` is out of range, or ``data_width`` not one of the widths.
    """

    def __init__(self, *, addr_width: int = 32, data_width: int = 32):
        self.addr_width = check_int("addr_width", addr_width, lo=1, hi=64)
        self.data_width = check_data_width(data_width)
        super().__init__({
            "up": In(AxiSignature(addr_width=addr_width, data_width=data_width)),
            "down": Out(AxiSignature(addr_width=addr_width, data_width=data_width)),
            "stall_rate": In(8),
            "seed": In(32),
            "stalled": Out(32),
        })

    def elaborate(self, platform):
        m = Module()
        state = Signal(64, init=_FIXED_STATE)
        started = Signal()  # the seed is loaded
        x1 = state ^ (state << 13)[:64]
        x2 = x1 ^ (x1 >> 7)
        x3 = x2 ^ (x2 << 17)[:64]
        m.d.sync += [started.eq(1),
                     state.eq(Mux(started, x3, Mux(self.seed == 0, _FIXED_STATE,
                                                   Cat(self.seed, self.seed))))]

        held_back = []
        for c, (name, members, from_master) in enumerate(AXI_CHANNELS):
            snd, rcv = (self.up, self.down) if from_master else (self.down, self.up)
            valid, ready = f"{name}valid", f"{name}ready"
            stall = state[8 * c:8 * c + 8] < self.stall_rate
            shown = Signal(name=f"{name}_shown")  # a beat shown to the receiver, not taken
            go = ~stall | shown
            m.d.comb += [getattr(rcv, valid).eq(getattr(snd, valid) & go),
                         getattr(snd, ready).eq(getattr(rcv, ready) & go),
                         *(getattr(rcv, k).eq(getattr(snd, k)) for k in members)]
            m.d.sync += shown.eq(getattr(rcv, valid) & ~getattr(rcv, ready))
            held_back.append(getattr(snd, valid) & ~go)
        with m.If(Cat(*held_back).any()):
            m.d.sync += self.stalled.eq(self.stalled + 1)
        return m


def _attach_dram(m, top, axi, suffix: str, stalls: AxiStalls, mem: AxiMemory) -> None:
    wiring.connect(m, axi, stalls.up)
    wiring.connect(m, stalls.down, mem.axi)
    m.d.comb += [stalls.stall_rate.eq(getattr(top, f"dram_stall_rate{suffix}")),
                 stalls.seed.eq(getattr(top, f"dram_stall_seed{suffix}")),
                 getattr(top, f"dram_stalls{suffix}").eq(stalls.stalled)]


def core_memories(prefix: str = "", *, n: int = 4, data_width: int = 32, **_) -> tuple[str, ...]:
    """The SBUF's and PSUM's memory arrays of a :class:`~hdl.core.NeuronCore` of these
    parameters at ``prefix`` (``""`` for a core that is the top, ``"core."`` in
    :class:`CoreWithDram`): what ``sim.host.core.CoreHost`` reads through VPI instead of the
    debug registers when a testbench makes them public (``sim.runner.run(public=...)``)."""
    lanes = data_width // 8
    return (f"{prefix}te.psum.mem",
            *(f"{prefix}sbuf.part{p}_lane{lane}" for p in range(n) for lane in range(lanes)))


class CoreWithDram(wiring.Component):
    """A :class:`~hdl.core.NeuronCore` whose AXI4 master port reaches an
    :class:`~hdl.axi_mem.AxiMemory` of ``dram_bytes`` (its DRAM) through :class:`AxiStalls`.

    Ports: ``axil`` (the core's AXI4-Lite register port, as on the core); ``regs_batch``
    and ``regs_active`` (a :class:`~hdl.register_player.RegisterPlayer`'s ``batches`` and
    ``active``: accesses played on the register port instead of
    ``axil``'s while it is active, :data:`REGISTER_BATCH` a batch); ``busy`` and
    ``error`` (the core's); ``dram_stall_rate``, ``dram_stall_seed`` and ``dram_stalls`` (the
    stalls' ``stall_rate``, ``seed`` and ``stalled``: rate 0, the default, never stalls);
    ``trace_enable``, ``trace_clear``, ``trace_count`` and ``trace_full`` of the core's
    :class:`~hdl.activity.ActivityRecorder` ``trace`` (:data:`TRACE_DEPTH` entries in its
    memory ``trace.events``, read through VPI for a profile).

    DRAM byte ``a`` is byte ``a % B`` (little-endian) of word ``a // B`` of the memory array
    ``mem.ram`` (B = the core's ``data_width`` / 8; the one signal of :attr:`public`), which
    a testbench reads and writes through VPI; it should do so only while no DMA runs. The
    memory starts zeroed, and reset does not clear it.

    Parameters
    ----------
    **core_params
        :class:`~hdl.core.NeuronCore`'s (``n``, ``sbuf_words``, ``psum_banks``,
        ``psum_words``, ``dram_bytes``, ``queue_depth``, ...), but ``ranks`` must be 0
        (:class:`RingWithDram` is the ring) and ``dram_bytes`` a power of two, at least 4.

    Raises
    ------
    TypeError
        If ``ranks`` is not an integer; as :class:`~hdl.core.NeuronCore` for the others.
    ValueError
        If ``ranks`` is not 0; if ``dram_bytes`` is not a power of two of at least 4; as
        :class:`~hdl.core.NeuronCore` for the others.
    """

    #: The internal signals a testbench reads and writes (``sim.runner.run(public=...)``):
    #: DRAM, and the activity recorder's entries.
    public = ("mem.ram", "trace.events")

    @staticmethod
    def public_for(*, n: int = 4, data_width: int = 32, **_) -> tuple[str, ...]:
        """:attr:`public` and the SBUF's and PSUM's memories of a core of these parameters
        (``**core_params`` as given to the constructor), which ``sim.host.core.CoreHost``
        then reads through VPI instead of the debug registers."""
        return (*CoreWithDram.public, *core_memories("core.", n=n, data_width=data_width))

    def __init__(self, **core_params):
        check_int("ranks", core_params.get("ranks", 0), lo=0, hi=0,
                  note="in CoreWithDram (RingWithDram is the ring)")
        self._core = NeuronCore(**core_params)
        self.dram_bytes = _check_pow2(self._core.dram_bytes)
        dw = self._core.data_width
        self._mem = AxiMemory(size_bytes=self.dram_bytes, data_width=dw)
        self._stalls = AxiStalls(data_width=dw)
        self._trace = ActivityRecorder(depth=TRACE_DEPTH)
        self._regs = RegisterPlayer(k=REGISTER_BATCH)
        super().__init__({**_register_ports(), "busy": Out(1), "error": Out(1),
                          **_stall_ports()})

    def iss_config(self, **kwargs):
        """The ``golden.iss.CoreConfig`` of the core (``kwargs`` override)."""
        return self._core.iss_config(**kwargs)

    def elaborate(self, platform):
        m = Module()
        m.submodules.core = core = self._core
        m.submodules.stalls = self._stalls
        m.submodules.mem = self._mem
        m.submodules.trace = self._trace
        m.submodules.regs = self._regs
        _attach_registers(m, self, core.axil, "", self._regs)
        m.d.comb += [self.busy.eq(core.busy), self.error.eq(core.error)]
        _attach_dram(m, self, core.axi, "", self._stalls, self._mem)
        _attach_trace(m, self, core.activity, "", self._trace)
        return m


class RingWithDram(wiring.Component):
    """A :class:`~hdl.multicore.CoreRing` whose core r reaches its own
    :class:`~hdl.axi_mem.AxiMemory` ``mem<r>`` through its own :class:`AxiStalls`.

    Ports: the ring's, but ``axi<r>``: ``axil<r>``, ``busy<r>``, ``error<r>`` of each core r,
    its register player's ``regs<r>_batch`` and ``regs_active<r>`` (as
    :class:`CoreWithDram`'s)
    and the links' ``latency``, ``stall_rate``, ``stall_seed``, ``stall_reseed``; and for each
    core r its DRAM stalls' ``dram_stall_rate<r>``, ``dram_stall_seed<r>``, ``dram_stalls<r>``
    (as :class:`CoreWithDram`'s). Core r's DRAM is the memory array ``mem<r>.ram``
    (:attr:`public`, :meth:`public_for`, with its SBUF's and PSUM's arrays).

    Parameters
    ----------
    ranks, max_latency : int
        :class:`~hdl.multicore.CoreRing`'s.
    **core
        :class:`~hdl.core.NeuronCore`'s, but ``dram_bytes`` must be a power of two, at least
        4.

    Raises
    ------
    TypeError
        As :class:`~hdl.multicore.CoreRing`.
    ValueError
        If ``dram_bytes`` is not a power of two of at least 4; as
        :class:`~hdl.multicore.CoreRing` for the others.
    """

    def __init__(self, *, ranks: int = 4, max_latency: int = MAX_LINK_LATENCY, **core):
        self._ring = CoreRing(ranks=ranks, max_latency=max_latency, **core)
        self.ranks, self.max_latency = self._ring.ranks, max_latency
        self.link_width = self._ring.link_width
        self.watchdog_cycles = self._ring.watchdog_cycles
        self.dram_bytes = _check_pow2(self._ring.iss_config().dram_bytes)
        dw = core.get("data_width", 32)
        self._mems = [AxiMemory(size_bytes=self.dram_bytes, data_width=dw)
                      for _ in range(self.ranks)]
        self._stalls = [AxiStalls(data_width=dw) for _ in range(self.ranks)]
        self._traces = [ActivityRecorder(depth=TRACE_DEPTH) for _ in range(self.ranks)]
        self._regs = [RegisterPlayer(k=REGISTER_BATCH) for _ in range(self.ranks)]
        #: The internal signals a testbench reads and writes (``sim.runner.run(public=...)``).
        self.public = self.public_for(self.ranks, **core)
        ports = {}
        for r in range(self.ranks):
            ports.update({**_register_ports(str(r)), f"busy{r}": Out(1),
                          f"error{r}": Out(1), **_stall_ports(str(r))})
        ports.update({"latency": In(range(max_latency + 1), init=1), "stall_rate": In(8),
                      "stall_seed": In(32), "stall_reseed": In(1)})
        super().__init__(ports)

    @staticmethod
    def public_for(ranks: int = 4, **core_params) -> tuple[str, ...]:
        """:attr:`public` of a ring of ``ranks`` cores of these parameters (as given to the
        constructor), without building one: each core's DRAM, SBUF and PSUM memories
        (:func:`core_memories`), which ``sim.host.core.CoreHost`` reads through VPI."""
        return tuple(path for r in range(ranks) for path in
                     (f"mem{r}.ram", f"trace{r}.events",
                      *core_memories(f"ring.core{r}.", **core_params)))

    def iss_config(self):
        """The ``golden.iss.CoreConfig`` of each core."""
        return self._ring.iss_config()

    def elaborate(self, platform):
        m = Module()
        m.submodules.ring = ring = self._ring
        m.d.comb += [ring.latency.eq(self.latency), ring.stall_rate.eq(self.stall_rate),
                     ring.stall_seed.eq(self.stall_seed),
                     ring.stall_reseed.eq(self.stall_reseed)]
        for r in range(self.ranks):
            m.submodules[f"stalls{r}"] = self._stalls[r]
            m.submodules[f"mem{r}"] = self._mems[r]
            m.submodules[f"regs{r}"] = self._regs[r]
            _attach_registers(m, self, getattr(ring, f"axil{r}"), str(r), self._regs[r])
            m.d.comb += [getattr(self, f"busy{r}").eq(getattr(ring, f"busy{r}")),
                         getattr(self, f"error{r}").eq(getattr(ring, f"error{r}"))]
            _attach_dram(m, self, getattr(ring, f"axi{r}"), str(r), self._stalls[r],
                         self._mems[r])
            m.submodules[f"trace{r}"] = self._traces[r]
            _attach_trace(m, self, getattr(ring, f"activity{r}"), str(r), self._traces[r])
        return m
