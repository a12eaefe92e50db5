"""Lab 2's schedule viewer: how golden/tensor_engine.py tiles C = A.T @ B for the tensor engine.

    python docs/labs/lab2-systolic/schedule.py --array 2 --m 3 --k 5 --n 7

prints the commands of ``golden.tensor_engine.gemm_schedule`` in issue order (the same sequence
``nclite gemm`` sends to the RTL, with the engine it builds: 8 PSUM banks of 4 x array words),
the PSUM blocks each round leaves for the host to drain, and the cycle figures that bound
``nclite gemm``'s "compute" line: one moving column per cycle at best, plus one pass through
the pipeline (``TensorEngine.latency``, from the class, without elaborating it).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))

from golden.tensor_engine import LoadStationary, gemm_schedule  # noqa: E402
from hdl.tensor_engine import TensorEngine  # noqa: E402


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--m", type=int, required=True, help="rows of C = columns of A (K x M)")
    p.add_argument("--k", type=int, required=True, help="contraction length")
    p.add_argument("--n", type=int, required=True, help="columns of C = columns of B (K x N)")
    p.add_argument("--array", type=int, default=8, help="array size (nclite gemm's --array)")
    p.add_argument("--banks", type=int, default=8, help="PSUM banks")
    p.add_argument("--words", type=int, default=None, help="PSUM words per bank (4 x array)")
    args = p.parse_args(argv)
    n = args.array
    words = args.words or 4 * n
    rounds = gemm_schedule(args.m, args.k, args.n, n=n, banks=args.banks, bank_words=words)
    columns = macs_slots = 0
    for r, rnd in enumerate(rounds):
        print(f"round {r}:")
        for cmd in rnd.commands:
            if isinstance(cmd, LoadStationary):
                print(f"  LOAD_STATIONARY  A[{cmd.k0}:{cmd.k1}, {cmd.m0}:{cmd.m1}]"
                      f"   ({cmd.k1 - cmd.k0} x {cmd.m1 - cmd.m0} of {n} x {n} PEs used)")
                used = (cmd.k1 - cmd.k0) * (cmd.m1 - cmd.m0)
            else:
                f = cmd.f1 - cmd.f0
                columns += f
                macs_slots += f * used
                mode = "accumulate" if cmd.accumulate else "overwrite"
                print(f"  MULTIPLY_MOVING  B[{cmd.k0}:{cmd.k1}, {cmd.f0}:{cmd.f1}] -> bank "
                      f"{cmd.bank} words {cmd.addr}..{cmd.addr + f - 1}, {mode}"
                      f"   ({f} moving columns)")
        for blk in rnd.blocks:
            print(f"  then drain C[{blk.m0}:{blk.m1}, {blk.f0}:{blk.f1}] from bank {blk.bank}")
    te = TensorEngine(n=n, psum_banks=args.banks, psum_words=words)
    macs = args.m * args.k * args.n
    assert macs == macs_slots
    print(f"moving columns (ideal cycles) : {columns}")
    print(f"useful MACs                   : {macs} = {macs / (n * n * columns):.1%} of the "
          f"{n}x{n} array's slots in those cycles")
    print(f"pipeline latency              : {te.latency} cycles (moving beat -> PSUM write: "
          f"n*add + mul + n - 1 + 2 + add with add={te.add_stages}, mul={te.mul_stages})")
    print(f"hidden weight loads           : a LOAD_STATIONARY costs no cycles if the "
          f"multiplication before it has >= {te.load_hidden_after} columns "
          f"(TensorEngine.load_hidden_after)")
    print(f"so at best about {columns + te.latency} cycles, "
          f"utilization <= {macs / (n * n * (columns + te.latency)):.1%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
