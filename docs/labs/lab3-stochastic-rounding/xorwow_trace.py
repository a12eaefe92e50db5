"""Step ``hdl/xorwow.py``'s ``xorwow_step`` in Amaranth's simulator beside ``golden/prng.py``.

    python docs/labs/lab3-stochastic-rounding/xorwow_trace.py [--seed 0] [--lane 0] [--steps 8]

A register of :data:`hdl.xorwow.XorwowState` starts at lane ``--lane``'s seeded state
(``golden.prng.lane_state``) and loads ``xorwow_step``'s next state on every clock edge; each
cycle the step's 32-bit output is compared with ``golden.prng.LanePRNG.next_u32`` for the same
lane. Prints one line per step and exits with status 1 at the first difference (then it also
prints which state words differ). Run it from the tree you are working in: it imports that
tree's ``hdl/`` and ``golden/``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))

from amaranth.hdl import Module, Signal  # noqa: E402
from amaranth.sim import Simulator  # noqa: E402

from golden.prng import LanePRNG, lane_state  # noqa: E402
from hdl.xorwow import XorwowState, xorwow_step  # noqa: E402

NAMES = ["v0", "v1", "v2", "v3", "v4", "d"]


def trace(seed: int, lane: int, steps: int) -> list[tuple[int, int, list[int], list[int]]]:
    """``steps`` rows of (RTL output, golden output, RTL next state, golden next state)."""
    st = [int(v) for v in lane_state(seed, lane + 1)[lane]]
    m = Module()
    state = Signal(XorwowState, init={"v": st[:5], "d": st[5]})
    nxt, out = xorwow_step(state)
    m.d.sync += state.eq(nxt)
    out_sig = Signal(32)
    m.d.comb += out_sig.eq(out)

    ref = LanePRNG(lane + 1, seed)
    rows = []

    async def tb(ctx):
        for _ in range(steps):
            got = ctx.get(out_sig)
            want = int(ref.next_u32()[lane])
            await ctx.tick()
            s = ctx.get(state)
            rows.append((got, want, [int(s.v[i]) for i in range(5)] + [int(s.d)],
                         [int(v) for v in ref.state[lane]]))

    sim = Simulator(m)
    sim.add_clock(1e-6)
    sim.add_testbench(tb)
    sim.run()
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seed", type=int, default=0, help="64-bit seed (default 0, as after reset)")
    ap.add_argument("--lane", type=int, default=0, help="lane index (default 0)")
    ap.add_argument("--steps", type=int, default=8, help="steps to compare (default 8)")
    a = ap.parse_args(argv)
    print(f"xorwow_step vs golden LanePRNG: seed {a.seed}, lane {a.lane}")
    print("step  RTL output  golden      top 16 bits (R of an SR cast, r = 16)")
    for t, (got, want, s_got, s_want) in enumerate(trace(a.seed, a.lane, a.steps)):
        ok = got == want and s_got == s_want
        print(f"{t:4d}  {got:#010x}  {want:#010x}  {want >> 16:#06x}  "
              f"{'ok' if ok else 'DIFFERENT'}")
        if not ok:
            for name, g, w in zip(NAMES, s_got, s_want, strict=True):
                if g != w:
                    print(f"      state {name}: RTL {g:#010x}, golden {w:#010x}")
            return 1
    print(f"all {a.steps} steps bit-exact")
    return 0


if __name__ == "__main__":
    sys.exit(main())
