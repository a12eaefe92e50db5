"""Fp32Adder in Amaranth's Python simulator, bit-exact against numpy float32 addition."""

import collections
import gc
import itertools

import numpy as np
import pytest
from amaranth.sim import Simulator

from hdl.fp32_add import FP32_ADD_MAX_STAGES, FP32_CANONICAL_NAN, Fp32Adder

N_RANDOM = 1200  # per generator family below, per stage count

# Special operands: every ordered pair of them is checked.
SPECIALS = [
    0x0000_0000, 0x8000_0000,  # ±0
    0x0000_0001, 0x8000_0001,  # ±smallest subnormal
    0x007F_FFFF, 0x807F_FFFF,  # ±largest subnormal
    0x0080_0000, 0x8080_0000,  # ±smallest normal
    0x0080_0001, 0x0040_0000,  # just above min normal; half of it (subnormal)
    0x7F7F_FFFF, 0xFF7F_FFFF,  # ±max finite
    0x7F7F_FFFE,  # max finite - 1 ulp
    0x7400_0000, 0x7440_0000,  # 2^105, 3 * 2^104: ulp of max is 2^104, half ulp 2^103
    0x7300_0000,  # 2^103: max + 2^103 is a tie that rounds up (to inf)
    0x7F80_0000, 0xFF80_0000,  # ±inf
    0x7FC0_0000, 0xFFC0_0000,  # quiet NaN, negative quiet NaN
    0x7F80_0001, 0xFFA0_0000,  # signalling NaNs
    0x7FFF_FFFF, 0x7FC0_1234,  # quiet NaNs with payloads
    0x3F80_0000, 0xBF80_0000,  # ±1.0
    0x3F80_0001, 0x3FFF_FFFF,  # 1 + 2^-23 (odd LSB), 2 - 2^-23
    0x3380_0000, 0xB380_0000,  # ±2^-24: half an ulp of 1.0 (a tie)
    0x3440_0000,  # 3 * 2^-24: 1.5 ulp of 1.0 (a tie)
    0x3300_0000,  # 2^-25: a quarter ulp of 1.0
    0x3380_0001,  # just above 2^-24
    0x4000_0000, 0xC000_0000,  # ±2.0
    0x4B80_0000,  # 2^24: adding 1.0 is a tie
]


def reference(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The contract: numpy float32 addition, every NaN as the canonical NaN."""
    with np.errstate(all="ignore"):
        total = a.view(np.float32) + b.view(np.float32)
    bits = total.view(np.uint32).copy()
    bits[np.isnan(total)] = FP32_CANONICAL_NAN
    return bits


def random_operands(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Random operand pairs of several kinds, so that rounding, cancellation and range limits
    are all exercised (uniform random bit patterns alone almost never meet)."""
    def bits(sign, exp, man):
        return ((sign.astype(np.uint32) << 31) | (exp.astype(np.uint32) << 23)
                | man.astype(np.uint32)).astype(np.uint32)

    def sign():
        return rng.integers(0, 2, n)

    def man():
        # Mantissas with runs of trailing zeros make exact ties after alignment common.
        return rng.integers(0, 1 << 23, n) & ~((1 << rng.integers(0, 24, n)) - 1)

    a_list, b_list = [], []
    # 1. Uniform random bit patterns.
    a_list.append(rng.integers(0, 1 << 32, n, dtype=np.uint32))
    b_list.append(rng.integers(0, 1 << 32, n, dtype=np.uint32))
    # 2. Nearby exponents (difference -3..3): cancellation, carries.
    ea = rng.integers(0, 255, n)
    eb = np.clip(ea + rng.integers(-3, 4, n), 0, 254)
    a_list.append(bits(sign(), ea, man()))
    b_list.append(bits(sign(), eb, man()))
    # 3. Exponent differences around the significand width: ties, sticky, round bit.
    ea = rng.integers(20, 255, n)
    eb = np.clip(ea - rng.integers(20, 30, n), 0, 254)
    a_list.append(bits(sign(), ea, man()))
    b_list.append(bits(sign(), eb, man()))
    # 4. Near-total cancellation: b = -(a) off by a few ulps.
    a = rng.integers(0, 0x7F80_0000, n, dtype=np.uint32) | (sign().astype(np.uint32) << 31)
    b_mag = np.clip((a & 0x7FFF_FFFF).astype(np.int64) + rng.integers(-3, 4, n), 0, 0x7F7F_FFFF)
    a_list.append(a)
    b_list.append((b_mag.astype(np.uint32) | (~a & 0x8000_0000)).astype(np.uint32))
    # 5. Subnormal and tiny-normal operands; 6. operands near overflow.
    a_list.append(bits(sign(), rng.integers(0, 3, n), rng.integers(0, 1 << 23, n)))
    b_list.append(bits(sign(), rng.integers(0, 3, n), rng.integers(0, 1 << 23, n)))
    a_list.append(bits(sign(), rng.integers(250, 255, n), man()))
    b_list.append(bits(sign(), rng.integers(248, 256, n), man()))
    return np.concatenate(a_list), np.concatenate(b_list)


def special_operands() -> tuple[np.ndarray, np.ndarray]:
    pairs = list(itertools.product(SPECIALS, repeat=2))
    return (np.array([p[0] for p in pairs], dtype=np.uint32),
            np.array([p[1] for p in pairs], dtype=np.uint32))


def simulate(dut: Fp32Adder, a: np.ndarray, b: np.ndarray, rng: np.random.Generator):
    """Drive the operands through the adder, one pair per enabled cycle, with random stalls
    (``en`` low, garbage on the operands) when pipelined. Returns ``(index, result)`` pairs:
    one per vector, and when pipelined one per cycle the result belongs to a vector, so a
    result that changes during a stall shows up as a mismatch."""
    seen = []
    sim = Simulator(dut)

    if dut.latency == 0:
        async def testbench(ctx):
            for x, y in zip(a.tolist(), b.tolist(), strict=True):
                ctx.set(dut.a, x)
                ctx.set(dut.b, y)
                seen.append((len(seen), ctx.get(dut.result)))
    else:
        enables = (rng.random(len(a) * 2) < 0.75).tolist()
        garbage = rng.integers(0, 1 << 32, len(a) * 2, dtype=np.uint32).tolist()

        async def testbench(ctx):
            # Tags of the operand pairs in flight (None: not a vector), oldest first.
            in_flight = collections.deque([None] * dut.latency)
            index = 0
            cycle = 0
            while in_flight[0] != len(a) - 1:
                en = index >= len(a) or enables[cycle % len(enables)]
                if en and index < len(a):
                    x, y = int(a[index]), int(b[index])
                else:
                    x = y = garbage[cycle % len(garbage)]
                ctx.set(dut.a, x)
                ctx.set(dut.b, y)
                ctx.set(dut.en, en)
                await ctx.tick()
                if en:
                    in_flight.append(index if index < len(a) else None)
                    in_flight.popleft()
                    index += 1
                if in_flight[0] is not None:
                    seen.append((in_flight[0], ctx.get(dut.result)))
                cycle += 1
        sim.add_clock(1e-6)

    sim.add_testbench(testbench)
    sim.run()
    return seen


@pytest.mark.parametrize("stages", range(FP32_ADD_MAX_STAGES + 1))
def test_matches_numpy(stages, seed):
    rng = np.random.default_rng([seed, stages])
    ra, rb = random_operands(rng, N_RANDOM)
    sa, sb = special_operands()
    a = np.concatenate([sa, ra])
    b = np.concatenate([sb, rb])

    dut = Fp32Adder(stages=stages)
    assert dut.latency == stages
    seen = simulate(dut, a, b, rng)
    want = reference(a, b).tolist()
    assert sorted({i for i, _ in seen}) == list(range(len(a))), f"seed {seed}: vectors missing"
    bad = [(i, got) for i, got in seen if got != want[i]]
    if bad:
        lines = [f"a=0x{a[i]:08X} b=0x{b[i]:08X}: got 0x{got:08X}, want 0x{want[i]:08X}"
                 for i, got in bad[:10]]
        pytest.fail(f"Fp32Adder(stages={stages}), seed {seed}: {len(bad)} of {len(seen)} "
                    f"observations of {len(a)} vectors differ, e.g.\n  " + "\n  ".join(lines))


def test_holds_while_disabled():
    """With en low the pipeline keeps its contents (and result) whatever the operands do."""
    dut = Fp32Adder(stages=3)

    async def testbench(ctx):
        ctx.set(dut.en, 1)
        for x in (0x3F80_0000, 0x4000_0000, 0x4040_0000):  # 1.0, 2.0, 3.0
            ctx.set(dut.a, x)
            ctx.set(dut.b, x)
            await ctx.tick()
        assert ctx.get(dut.result) == 0x4000_0000  # 1.0 + 1.0
        ctx.set(dut.en, 0)
        ctx.set(dut.a, 0x7FC0_0000)
        for _ in range(5):
            await ctx.tick()
            assert ctx.get(dut.result) == 0x4000_0000
        ctx.set(dut.en, 1)
        await ctx.tick()
        assert ctx.get(dut.result) == 0x4080_0000  # 2.0 + 2.0

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(testbench)
    sim.run()


@pytest.mark.parametrize("stages", [-1, FP32_ADD_MAX_STAGES + 1, 99, "2", 2.0, True, None])
@pytest.mark.filterwarnings("ignore::amaranth.hdl._ir.UnusedElaboratable")
def test_bad_stages(stages):
    with pytest.raises((TypeError, ValueError), match="stages"):
        Fp32Adder(stages=stages)
    gc.collect()  # the half-built component warns when collected: let that happen here


def test_all_stage_counts_elaborate():
    from amaranth.back import verilog

    for stages in range(FP32_ADD_MAX_STAGES + 1):
        text = verilog.convert(Fp32Adder(stages=stages), name="fp32_add", emit_src=False)
        for port in ("en", "a", "b", "result"):
            assert f" {port};" in text
