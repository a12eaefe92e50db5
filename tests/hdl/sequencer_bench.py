"""A pysim bench shared by the sequencer's check tests: each descriptor alone into a
``hdl.sequencer.Sequencer`` whose engines take at once, and the error code it sets."""

from __future__ import annotations

from amaranth.sim import Simulator

from golden.isa import ErrorCode


def error_codes(seq, descriptors) -> list[ErrorCode]:
    """The error code ``seq`` sets for each descriptor (eight 32-bit words) pushed alone, a few
    cycles after it (cleared before the next one)."""
    codes = []

    async def bench(ctx):
        for port in (seq.te, seq.dma, seq.act, seq.coll, seq.seed):
            ctx.set(port.ready, 1)
        for words in descriptors:
            ctx.set(seq.desc.payload, sum(int(x) << (32 * i) for i, x in enumerate(words)))
            ctx.set(seq.desc.valid, 1)
            await ctx.tick()
            ctx.set(seq.desc.valid, 0)
            await ctx.tick().repeat(4)
            codes.append(ErrorCode(ctx.get(seq.error_code).value))
            if codes[-1] != ErrorCode.OK:
                ctx.set(seq.clear_error, 1)
                await ctx.tick()
                ctx.set(seq.clear_error, 0)
                await ctx.tick()

    sim = Simulator(seq)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    return codes
