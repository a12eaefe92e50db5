"""The cells of one synthesis result, by type: reads ``nclite synth component ... --json``.

    nclite synth component hdl.fp32_mul:Fp32Multiplier -p stages=2 --device ecp5-85f \\
        --area-only --json | python docs/labs/lab5-synthesis-timing/cells.py

Prints the design and part, then the cell count of every cell type Yosys mapped the design to,
and the LUT4-equivalents the flow reports as "LUTs" beside the LUT4 and carry cells they come
from (``synth/fpga.py``, ``_area``). The counts move with the versions of Yosys and nextpnr
(the result's ``tools``), so, like nclite's own ``area:`` line, every line with a count starts
with ``area:`` (``make docs-check`` compares the other lines only).
"""

from __future__ import annotations

import json
import sys


def main() -> int:
    r = json.load(sys.stdin)
    area = r["area"]
    print(f"{r['design']} {r['params']} on {r['part']}, cells by type:")
    for cell, count in sorted(area["by_type"].items()):
        print(f"  area: {cell:<12} {count:5d}")
    print(f"  area: {area['luts']} LUT4-equivalents from {area['lut4']} LUT4 cells and "
          f"{area['carry_cells']} carry cells")
    return 0


if __name__ == "__main__":
    sys.exit(main())
