"""hdl.fp32_widen.Fp32Widen in Amaranth's simulator against golden.formats.to_fp32_bits: every
pattern of fp8-e4m3, fp8-e5m2 and fp16 (zeros, subnormals, infinities, NaNs included), bf16's
specials and random patterns, fp32 random patterns; upper bits of the word set to junk (only the
element's low bits count). (On the emitted Verilog, in both simulators, it is checked inside the
core's vector commands: tests/hdl/test_core_rtl.py.)"""

import numpy as np
from amaranth.sim import Simulator

from golden.formats import to_fp32_bits
from hdl.formats import Dtype
from hdl.fp32_widen import Fp32Widen
from sim.tb.vectors import random_bits, seeded_rng, special_bits


def test_widen_matches_golden(seed):
    rng = seeded_rng("fp32_widen", seed=seed)
    cases = {
        "fp8_e4m3": np.arange(256), "fp8_e5m2": np.arange(256), "fp16": np.arange(1 << 16),
        "bf16": np.concatenate([special_bits("bf16"), random_bits("bf16", rng, 2000)]),
        "fp32": np.concatenate([special_bits("fp32"), random_bits("fp32", rng, 2000)]),
    }
    dut = Fp32Widen()
    got = {name: [] for name in cases}
    junk = {name: rng.integers(0, 1 << 32, size=len(v), dtype=np.uint64)
            for name, v in cases.items()}

    async def bench(ctx):
        for name, values in cases.items():
            bits = {"fp8_e4m3": 8, "fp8_e5m2": 8, "fp16": 16, "bf16": 16, "fp32": 32}[name]
            ctx.set(dut.dtype, {d.golden_name: d for d in Dtype}[name])
            for v, j in zip(values.tolist(), junk[name].tolist(), strict=True):
                ctx.set(dut.word, (int(v) | (int(j) >> bits << bits)) & 0xFFFFFFFF)
                got[name].append(ctx.get(dut.result))

    sim = Simulator(dut)
    sim.add_testbench(bench)
    sim.run()
    for name, values in cases.items():
        size = {"fp8_e4m3": np.uint8, "fp8_e5m2": np.uint8, "fp16": np.uint16,
                "bf16": np.uint16, "fp32": np.uint32}[name]
        want = to_fp32_bits(values.astype(size), name)
        g = np.array(got[name], dtype=np.uint32)
        bad = np.flatnonzero(g != want)
        assert not bad.size, (f"{name} (seed {seed}): {bad.size} differ, first "
                              f"{int(values[bad[0]]):#x}: RTL {int(g[bad[0]]):#010x}, golden "
                              f"{int(want[bad[0]]):#010x}")
