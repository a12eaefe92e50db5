"""make bench's sparsity section (``sim.tools.bench_sparsity``): rendering, failures and the
README's rows from a hand-made section (the runs themselves are `make bench`'s)."""

import pytest

from sim.tools import bench, readme
from sim.tools import bench_sparsity as bs


def _rows(where_cycles: str, n: int, mpc: dict, exact: bool = True) -> list[dict]:
    m, k, f = bs.te_shape(n) if where_cycles == "compute_cycles" else bs.core_shape(n)
    macs = m * k * f
    return [{"n": n, "mode": mode, "m": m, "k": k, "f": f, "bit_exact": exact,
             where_cycles: round(macs / mpc[mode]), "macs": macs,
             "macs_per_cycle": mpc[mode], "speedup": mpc[mode] / mpc["dense"]}
            for mode in bs.MODES]


def _section(exact: bool = True) -> dict:
    te = {"dense": 15.0, "2:4": 30.0, "4:8": 30.0, "4:12": 42.0, "4:16": 57.0}
    core = {"dense": 14.0, "2:4": 25.0, "4:8": 25.0, "4:12": 35.0, "4:16": 42.0}
    area = [{"engine": label, "params": p, "cells": c, "luts": lut, "ffs": 1, "dsps": d,
             "brams": 8, "luts_ratio": lut / 20000, "cells_ratio": c / 100}
            for (label, p), c, lut, d in zip(bs.AREA_PARAMS, (100, 110, 130),
                                             (20000, 21000, 25000), (16, 16, 17), strict=True)]
    return {"targets": bs.TARGETS,
            "tensor_engine": [r for n in bs.SPARSE_SIZES
                              for r in _rows("compute_cycles", n, te, exact)],
            "core": [r for n in bs.SPARSE_SIZES for r in _rows("cycles", n, core)],
            "area": area}


def test_rendering_failures_and_readme_rows():
    sec = _section()
    md = "\n".join(bs.render_sparsity(sec))
    assert "| tensor engine | 4 | 8x64x64 | 4:16 | 575 | 57.0 | 3.80x | yes |" in md
    assert "| NeuronCore | 8 | 256x256x256 | 2:4 |" in md
    assert "| sparse, every pattern | 130 | 25000 | 1 | 17 | 1.25x |" in md
    assert bs.sparsity_failures(sec) == []
    rows = bs.readme_rows(sec)
    assert rows[0] == ("sparse GEMM, tensor engine 4×4, 8×64×64",
                       "vs dense: 2:4 2.00×, 4:8 2.00×, 4:12 2.80×, 4:16 3.80×",
                       "dense-equivalent MACs/cycle (15.0 dense); A pruned by magnitude, "
                       "compressed; bit-exact")
    assert rows[-1][1] == "1.25× the dense LUTs (2:4 only: 1.05×)"
    assert len(rows) == 2 * len(bs.SPARSE_SIZES) + 1


def test_a_mismatch_and_an_error_are_failures():
    sec = _section(exact=False)
    assert len(bs.sparsity_failures(sec)) == len(bs.MODES) * len(bs.SPARSE_SIZES)
    assert "| NO |" in "\n".join(bs.render_sparsity(sec))
    sec["core"][0] = {"n": 4, "error": "SimulationFailed: boom"}
    assert any("boom" in b for b in bs.sparsity_failures(sec))
    assert bs.sparsity_failures({"error": "RuntimeError: x"}) == ["sparsity: RuntimeError: x"]
    assert "FAILED: RuntimeError: x" in bench.render_md({"sparsity": {"error": "RuntimeError: x"}})


def test_readme_table_shows_the_sparse_rows():
    b, synth = readme.load()
    b["sparsity"] = _section()
    table = readme.render(b, synth)
    assert "| sparse GEMM, whole core 8×8, 256×256×256 |" in table
    with pytest.raises(ValueError, match="sparsity benchmark failed"):
        readme.render(dict(b, sparsity={"error": "boom"}), synth)


def test_section_is_selectable():
    assert "sparsity" in bench.SECTIONS
    args = bench.section_args(["sparsity"])
    assert args["sparsity"] and not args["core"]
    assert bench.count_runs(quick=True, **args) == len(bs.MODES) + 1
