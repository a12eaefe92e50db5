"""cocotb test of :mod:`sim.tb.streams` on ``sim.tb.selftest_design.StreamRegister`` (``o = i + 1``,
one beat of buffering): a source with valid gaps, a sink with back-pressure and a monitor on
the same output see every beat, in order, once; ``wait_until`` and its timeout."""

import cocotb

from sim.tb import streams, tbutil


@cocotb.test(**tbutil.timeout(1))
async def source_sink_monitor(dut):
    src = streams.StreamSource(dut, "i", pause=streams.pauses(tbutil.rng(1), 0.4))
    sink = streams.StreamSink(dut, "o", pause=streams.pauses(tbutil.rng(2), 0.5, max_burst=3))
    seen = []
    mon = streams.StreamMonitor(dut, "o", on_beat=seen.append)
    await tbutil.start_clock(dut)
    await tbutil.reset(dut)
    beats = [int(x) for x in tbutil.rng(3).integers(0, 0xFFFF, 300)]
    src.send(beats)
    await src.wait()
    assert src.count == len(beats) and src.idle
    await sink.wait_count(len(beats))
    got = [await sink.recv() for _ in beats]
    want = [(b + 1) & 0xFFFF for b in beats]
    assert got == want, f"sink: {got[:8]} ... != {want[:8]} ... (seed {tbutil.seed()})"
    assert seen == want and mon.count == len(beats), "the monitor saw other beats"
    cycle = await streams.wait_until(dut.o__valid, 0, clock=dut.clk, timeout_cycles=10,
                                     what="o idle")
    assert cycle == streams.sim_cycles()
    try:
        await streams.wait_until(dut.o__valid, 1, clock=dut.clk, timeout_cycles=20,
                                 what="o never valid")
    except streams.StreamError as exc:
        assert "o never valid" in str(exc)
    else:
        raise AssertionError("wait_until did not time out")
