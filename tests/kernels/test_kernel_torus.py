"""The torus in the kernel API (sim/kernels/collectives.py): ``ncc.torus_all_reduce``,
``ncc.torus_all_to_all`` and the sub-ring ops' ``dim`` on tori of ISS cores, against
golden.collective's ``torus_all_reduce``, flat ``all_to_all`` and ``permute`` of the inputs;
and the errors they raise, at the kernel's line. (RTL: tests/hdl/test_torus_rtl.py and
test_multicore_rtl.py's torus.) Seed: ``NCLITE_SEED``.
"""

from __future__ import annotations

import textwrap

import numpy as np
import pytest

from golden.collective import all_to_all, permute, torus_all_reduce, torus_groups
from golden.isa import CollectiveDim
from sim.kernels import KernelError, load_kernel, run_kernel

KERNEL = """\
import numpy as np
from sim.kernels import ncc, nisa, nl
from sim.kernels.run import DEFAULT_CONFIG

CORES = {cores}
CONFIG = {{**DEFAULT_CONFIG, "link_width": {w}, "torus_rows": {rows}}}
W, C = {w}, {cols}


def inputs(rng, rank):
    bits = rng.integers(0, 1 << 32, (W, C), dtype=np.uint64).astype(np.uint32)
    x = np.where(rng.random((W, C)) < 0.5, bits,
                 rng.standard_normal((W, C)).astype(np.float32).view(np.uint32))
    x[:, :3] = np.array([0x7FA00001, 0xFF800000, 0x80000000], np.uint32)[:3]
    return {{"x": x.view(np.float32)}}


def kernel(x):
    out = nl.ndarray((W, C), nl.float32, buffer=nl.shared_hbm)
    pad = nl.ndarray((W, 1 + nl.program_id(0)), nl.float32, buffer=nl.sbuf)  # places differ
    a = nl.ndarray((W, C), nl.float32, buffer=nl.sbuf)
    b = nl.ndarray((W, C), nl.float32, buffer=nl.sbuf)
    c = nl.ndarray((W, C), nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(a, x)
    {call}
    nisa.dma_copy(out, {result})
    return out
"""


def _run(tmp_path, *, cores, rows, w, cols, call, result, seed):
    path = tmp_path / "torus.py"
    path.write_text(KERNEL.format(cores=cores, rows=rows, w=w, cols=cols, call=call,
                                  result=result))
    module = load_kernel(path)
    r = run_kernel(path, seed=seed)
    rng = np.random.default_rng(seed)
    words = [module.inputs(rng, k)["x"].view(np.uint32).T.reshape(-1) for k in range(cores)]
    got = [r["outputs"]["out"][k].view(np.uint32).T.reshape(-1) for k in range(cores)]
    return words, got


@pytest.mark.parametrize(("rows", "cols_", "w", "cols"), [(2, 2, 1, 7), (2, 2, 2, 3),
                                                           (2, 3, 1, 5), (3, 2, 2, 4)])
def test_torus_all_reduce_kernel(tmp_path, rows, cols_, w, cols, seed):
    words, got = _run(tmp_path, cores=rows * cols_, rows=rows, w=w, cols=cols,
                      call="ncc.torus_all_reduce(a)", result="a", seed=seed)
    want = torus_all_reduce(words, rows, cols_, w)
    for k in range(rows * cols_):
        same = (got[k] == want[k]) | (_nan(got[k]) & _nan(want[k]))
        assert same.all(), (seed, k)


def _nan(u: np.ndarray) -> np.ndarray:
    return ((u & 0x7F800000) == 0x7F800000) & ((u & 0x7FFFFF) != 0)


@pytest.mark.parametrize(("rows", "cols_", "w", "mult"), [(2, 2, 1, 1), (2, 2, 2, 2),
                                                          (2, 3, 1, 1), (3, 2, 1, 2)])
def test_torus_all_to_all_kernel(tmp_path, rows, cols_, w, mult, seed):
    P = rows * cols_
    words, got = _run(tmp_path, cores=P, rows=rows, w=w, cols=P * mult,
                      call="ncc.torus_all_to_all(a, b, c)", result="c", seed=seed)
    for k, slots in enumerate(all_to_all(words, w)):
        assert np.array_equal(got[k], np.concatenate(slots)), (seed, k)


@pytest.mark.parametrize("dim", ["row", "column"])
def test_permute_along_a_dim(tmp_path, dim, seed):
    rows, cols_ = 2, 3
    words, got = _run(tmp_path, cores=6, rows=rows, w=1, cols=5,
                      call=f"ncc.permute(a, b, 1, dim={dim!r})", result="b", seed=seed)
    d = CollectiveDim.ROW if dim == "row" else CollectiveDim.COLUMN
    for group in torus_groups(rows, cols_, d):
        moved = permute([words[k] for k in group], 1)
        for k, m in zip(group, moved, strict=True):
            assert np.array_equal(got[k], m), (seed, dim, k)


ERRORS = {
    "column on a ring": (4, 1, "ncc.all_reduce(a, dim='column')", "needs a torus"),
    "bad dim": (4, 2, "ncc.all_reduce(a, dim='diagonal')", "dim must be 'row' or 'column'"),
    "torus op on a ring": (4, 1, "ncc.torus_all_reduce(a)", "needs a torus of cores"),
    "a2a columns": (4, 2, "ncc.torus_all_to_all(a[:, 0:6], b[:, 0:6], c[:, 0:6])",
                    "must be a multiple of the 4 cores"),
    "a2a overlap": (4, 2, "ncc.torus_all_to_all(a[:, 0:4], a[:, 4:8], a[:, 2:6])",
                    "must not share SBUF words"),
    "shift along a column": (6, 2, "ncc.permute(a, b, 2, dim='column')",
                             "shift must be an integer in 1..1"),
}

ERROR_KERNEL = """\
from sim.kernels import ncc, nisa, nl
from sim.kernels.run import DEFAULT_CONFIG

CORES = {cores}
CONFIG = {{**DEFAULT_CONFIG, "torus_rows": {rows}}}


def inputs(rng, rank):
    return {{"x": rng.standard_normal((1, 8)).astype(nl.float32)}}


def kernel(x):
    a = nl.ndarray((1, 8), nl.float32, buffer=nl.sbuf)
    b = nl.ndarray((1, 8), nl.float32, buffer=nl.sbuf)
    c = nl.ndarray((1, 8), nl.float32, buffer=nl.sbuf)
{body}  # HERE
    return x
"""


@pytest.mark.parametrize("case", list(ERRORS))
def test_torus_kernel_errors(tmp_path, case):
    cores, rows, body, text = ERRORS[case]
    path = tmp_path / "bad.py"
    path.write_text(ERROR_KERNEL.format(cores=cores, rows=rows,
                                        body=textwrap.indent(body, "    ")))
    line = next(i + 1 for i, t in enumerate(path.read_text().splitlines()) if "# HERE" in t)
    with pytest.raises(KernelError) as info:
        run_kernel(path)
    assert (info.value.file, info.value.line) == (str(path), line), str(info.value)
    assert text in info.value.reason, str(info.value)
