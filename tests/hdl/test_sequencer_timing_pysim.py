# amaranth: UnusedElaboratable=no
"""The sequencer's dispatch timing (``hdl.sequencer``), in Amaranth's simulator, against its
documented attributes: a descriptor entering in cycle t is offered to its engine in cycle
t + ``dispatch_latency`` + 1 (its dispatch cycle's next), a DMA command whose checks before the
DRAM bound pass at t + ``dma_dispatch_latency`` + 1, and a command behind another leaves the
head ``dispatch_interval`` cycles after it, or ``release_latency`` cycles after its engine's busy
falls. The engines take at once."""

from amaranth.sim import Simulator

from golden.isa import Opcode, encode
from hdl.sequencer import Sequencer


def _desc(op, **fields) -> int:
    return sum(int(w) << (32 * i) for i, w in enumerate(encode(op, **fields)))


LS = _desc(Opcode.LOAD_STATIONARY, fmt=0, part=0, k=2, m=2, sbuf_addr=0, sparsity=0)
STORE = _desc(Opcode.DMA_STORE, dtype=2, part=0, rows=1, sbuf_addr=8, cols=4, dram_addr=0,
              dram_stride=16)
SEED = _desc(Opcode.SET_SEED, seed=5)


def _offered(descs, cycles=16, te_busy=0):
    """Push ``descs`` back to back from cycle 0, the tensor feeder busy for ``te_busy`` cycles
    after it takes a command (from the cycle after); return the cycles in which each engine's
    ``valid`` is high, and the cycle each descriptor was taken."""
    seq = Sequencer(n=2, sbuf_words=64, psum_banks=2, psum_words=16, dram_bytes=1 << 12)
    seen = {"te": [], "dma": [], "seed": []}
    taken = []

    async def bench(ctx):
        for port in (seq.te, seq.dma, seq.act, seq.coll, seq.seed):
            ctx.set(port.ready, 1)
        pending = list(descs)
        busy_until = -1  # the last cycle the tensor feeder is busy
        for t in range(cycles):
            ctx.set(seq.te_feed_busy, t <= busy_until)
            if pending:
                ctx.set(seq.desc.payload, pending[0])
                ctx.set(seq.desc.valid, 1)
            else:
                ctx.set(seq.desc.valid, 0)
            for name in seen:
                if ctx.get(getattr(seq, name).valid):
                    seen[name].append(t)
            if ctx.get(seq.te.valid) and te_busy:
                busy_until = t + te_busy
            if pending and ctx.get(seq.desc.ready):
                taken.append(t)
                pending.pop(0)
            await ctx.tick()

    sim = Simulator(seq)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    return seq, seen, taken


def test_a_command_is_offered_dispatch_latency_after_it_enters():
    seq, seen, taken = _offered([SEED])
    assert taken == [0]
    assert seen["seed"] == [seq.dispatch_latency + 1], seen


def test_a_dma_command_waits_for_its_dram_bound():
    seq, seen, taken = _offered([STORE])
    assert seen["dma"] == [seq.dma_dispatch_latency + 1], seen


def test_the_command_behind_leaves_dispatch_interval_later():
    seq, seen, taken = _offered([LS, SEED])
    assert taken == [0, 1]
    first = seq.dispatch_latency + 1
    assert seen["te"] == [first], seen
    assert seen["seed"] == [first + seq.dispatch_interval], seen


def test_a_command_behind_a_busy_engine_leaves_release_latency_after_its_busy_falls():
    busy = 6  # longer than the dispatch interval
    seq, seen, taken = _offered([LS, LS], te_busy=busy)
    first = seq.dispatch_latency + 1
    falls = first + busy + 1  # the first cycle te_feed_busy is low again
    assert seen["te"] == [first, falls + seq.release_latency + 1], seen
