# amaranth: UnusedElaboratable=no
"""The sequencer's wait for a sparse tile's tags (``hdl.sequencer``), in Amaranth's simulator:
the corner cases the whole-core programs do not time exactly. After a sparse LOAD_STATIONARY
whose tags are bad, the error is BAD_TAGS at its index with one command executed, as the ISS
says, whether the next descriptor waits in the sequencer or arrives in the very cycle the
tags are known; a DMA's BUS_ERROR that arrived during the wait stands; either way a MATMUL is
BAD_SHAPE afterwards (the tile is forgotten)."""

import pytest
from amaranth.sim import Simulator

from golden.isa import ErrorCode, Opcode, encode
from hdl.sequencer import Sequencer


def _desc(op, **fields) -> int:
    return sum(int(w) << (32 * i) for i, w in enumerate(encode(op, **fields)))


LS = _desc(Opcode.LOAD_STATIONARY, fmt=0, part=0, k=8, m=4, sbuf_addr=0, sparsity=1)
MM = _desc(Opcode.MATMUL, fmt=0, part=0, k=8, f=1, sbuf_addr=16, bank=0, psum_addr=0,
           accumulate=0)
BARRIER = _desc(Opcode.BARRIER)


def _run(next_desc, *, arrives_late: bool, bus_error: bool = False):
    """LS, then ``next_desc`` (in the head during the wait, or offered exactly as the tags
    are known); the tags are bad. Returns (code, index, executed), then the code of a MATMUL
    pushed after CTRL clear-error."""
    seq = Sequencer(n=4, sbuf_words=64, psum_banks=2, psum_words=16, dram_bytes=1 << 12,
                    sparse=True)
    out = {}

    async def offer(ctx, desc, cycles=1):
        """Offer ``desc`` for one cycle, then wait ``cycles`` - 1 more."""
        ctx.set(seq.desc.payload, desc)
        ctx.set(seq.desc.valid, 1)
        await ctx.tick()
        ctx.set(seq.desc.valid, 0)
        for _ in range(cycles - 1):
            await ctx.tick()

    async def bench(ctx):
        for port in (seq.te, seq.dma, seq.act, seq.coll, seq.seed):
            ctx.set(port.ready, 1)
        # LS enters, and is dispatched seq.dispatch_latency cycles later
        await offer(ctx, LS, seq.dispatch_latency + 1)
        ctx.set(seq.te_loading, 1)
        if not arrives_late:
            await offer(ctx, next_desc)
        if bus_error:
            ctx.set(seq.dma_error, 1)
        for _ in range(4):
            await ctx.tick()
        ctx.set(seq.te_loading, 0)
        ctx.set(seq.te_tags_bad, 1)
        if arrives_late:
            ctx.set(seq.desc.payload, next_desc)
            ctx.set(seq.desc.valid, 1)
        await ctx.tick()
        ctx.set(seq.desc.valid, 0)
        for _ in range(4):
            await ctx.tick()
        out["state"] = (ErrorCode(ctx.get(seq.error_code).value), ctx.get(seq.error_index),
                        ctx.get(seq.executed))
        ctx.set(seq.clear_error, 1)
        ctx.set(seq.dma_error, 0)
        await ctx.tick()
        ctx.set(seq.clear_error, 0)
        await offer(ctx, MM, seq.dispatch_latency + 2)  # (its error shows a cycle later)
        out["after"] = ErrorCode(ctx.get(seq.error_code).value)

    sim = Simulator(seq)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    return out["state"], out["after"]


@pytest.mark.parametrize("arrives_late", [False, True], ids=["in-head", "same-cycle"])
@pytest.mark.parametrize("name, desc", [("barrier", BARRIER), ("matmul", MM)])
def test_bad_tags_stop_everything_after(name, desc, arrives_late):
    (code, index, executed), after = _run(desc, arrives_late=arrives_late)
    assert (code, index, executed) == (ErrorCode.BAD_TAGS, 0, 1), name
    assert after == ErrorCode.BAD_SHAPE


def test_an_earlier_bus_error_stands():
    (code, index, executed), after = _run(BARRIER, arrives_late=True, bus_error=True)
    assert code == ErrorCode.BUS_ERROR and executed == 1
    assert after == ErrorCode.BAD_SHAPE
