"""The kernel API (``sim.kernels``): errors at the kernel's line, what each instruction records,
allocation and lifetime, and kernels on the ISS against a plain numpy statement of their
meaning. (RTL runs: ``test_kernel_rtl.py``.)"""

from __future__ import annotations

import textwrap

import numpy as np
import pytest

from golden.isa import Dtype, Opcode, decode
from sim.kernels import KernelError, load_kernel, nisa, nl, run_kernel, trace_kernel

HEADER = """\
import numpy as np
from sim.kernels import ncc, nisa, nl

def inputs(rng):
    return {"a": rng.standard_normal((4, 4)).astype(nl.bfloat16),
            "x": rng.standard_normal((4, 8)).astype(nl.float32)}

def kernel(a, x):
"""


def _kernel_file(tmp_path, body: str, name: str = "k.py"):
    """A kernel file whose kernel() is ``body``; returns (path, the line of ``# HERE``)."""
    text = HEADER + textwrap.indent(textwrap.dedent(body), "    ")
    path = tmp_path / name
    path.write_text(text)
    lines = [i + 1 for i, line in enumerate(text.splitlines()) if "# HERE" in line]
    return path, (lines[0] if lines else None)


ERRORS = {
    "partitions > N": ("""\
        t = nl.ndarray((5, 4), nl.bfloat16, buffer=nl.sbuf)  # HERE
        return a
        """, "at most N = 4 partitions"),
    "SBUF overflow": ("""\
        keep = []
        for i in range(300):
            keep.append(nl.ndarray((4, 1), nl.float32, buffer=nl.sbuf))  # HERE
        return a
        """, "SBUF overflow"),
    "PSUM overflow": ("""\
        keep = [nl.ndarray((4, 16), nl.float32, buffer=nl.psum) for _ in range(4)]
        more = nl.ndarray((4, 1), nl.float32, buffer=nl.psum)  # HERE
        return a
        """, "PSUM overflow"),
    "PSUM tile wider than a bank": ("""\
        p = nl.ndarray((4, 17), nl.float32, buffer=nl.psum)  # HERE
        return a
        """, "one bank"),
    "PSUM not fp32": ("""\
        p = nl.ndarray((4, 4), nl.bfloat16, buffer=nl.psum)  # HERE
        return a
        """, "float32 only"),
    "dma shapes": ("""\
        t = nl.ndarray((4, 3), nl.bfloat16, buffer=nl.sbuf)
        nisa.dma_copy(t, a)  # HERE
        return a
        """, "shapes differ"),
    "dma dtypes": ("""\
        t = nl.ndarray((4, 8), nl.bfloat16, buffer=nl.sbuf)
        nisa.dma_copy(t, x)  # HERE
        return a
        """, "dtypes differ"),
    "dma sbuf to sbuf": ("""\
        t = nl.ndarray((4, 4), nl.bfloat16, buffer=nl.sbuf)
        u = nl.ndarray((4, 4), nl.bfloat16, buffer=nl.sbuf)
        nisa.dma_copy(t, u)  # HERE
        return a
        """, "dma_copy moves between"),
    "K mismatch": ("""\
        s = nl.ndarray((4, 4), nl.bfloat16, buffer=nl.sbuf)
        m = nl.ndarray((3, 8), nl.bfloat16, buffer=nl.sbuf)
        p = nl.ndarray((4, 8), nl.float32, buffer=nl.psum)
        nisa.nc_matmul(p, s, m)  # HERE
        return a
        """, "must share K"),
    "matmul dst shape": ("""\
        s = nl.ndarray((4, 4), nl.bfloat16, buffer=nl.sbuf)
        m = nl.ndarray((4, 8), nl.bfloat16, buffer=nl.sbuf)
        p = nl.ndarray((4, 4), nl.float32, buffer=nl.psum)
        nisa.nc_matmul(p, s, m)  # HERE
        return a
        """, "dst must be (M, F) = (4, 8)"),
    "matmul fp32 operand": ("""\
        s = nl.ndarray((4, 4), nl.float32, buffer=nl.sbuf)
        m = nl.ndarray((4, 8), nl.bfloat16, buffer=nl.sbuf)
        p = nl.ndarray((4, 8), nl.float32, buffer=nl.psum)
        nisa.nc_matmul(p, s, m)  # HERE
        return a
        """, "stationary must be bfloat16"),
    "used after its scope": ("""\
        with nl.scope():
            t = nl.ndarray((4, 4), nl.bfloat16, buffer=nl.sbuf)
        nisa.dma_copy(t, a)  # HERE
        return a
        """, "used after it was freed"),
    "activation partitions": ("""\
        p = nl.ndarray((4, 8), nl.float32, buffer=nl.psum)
        t = nl.ndarray((4, 8), nl.bfloat16, buffer=nl.sbuf)
        nisa.activation(t[0:2], nl.relu, p[2:4])  # HERE
        return a
        """, "same partitions"),
    "activation from narrow SBUF": ("""\
        s = nl.ndarray((4, 4), nl.bfloat16, buffer=nl.sbuf)
        t = nl.ndarray((4, 4), nl.bfloat16, buffer=nl.sbuf)
        nisa.tensor_copy(t, s)  # HERE
        return a
        """, "must be float32"),
    "activation op": ("""\
        p = nl.ndarray((4, 8), nl.float32, buffer=nl.psum)
        t = nl.ndarray((4, 8), nl.float32, buffer=nl.sbuf)
        nisa.activation(t, np.exp, p)  # HERE
        return a
        """, "nl.copy or nl.relu"),
    "scale not fp32": ("""\
        p = nl.ndarray((4, 8), nl.float32, buffer=nl.psum)
        t = nl.ndarray((4, 8), nl.float32, buffer=nl.sbuf)
        nisa.activation(t, nl.copy, p, scale=0.1)  # HERE
        return a
        """, "not an fp32 value"),
    "scale beyond fp32": ("""\
        p = nl.ndarray((4, 8), nl.float32, buffer=nl.psum)
        t = nl.ndarray((4, 8), nl.float32, buffer=nl.sbuf)
        nisa.activation(t, nl.copy, p, scale=10 ** 400)  # HERE
        return a
        """, "not an fp32 value"),
    "rounding": ("""\
        p = nl.ndarray((4, 8), nl.float32, buffer=nl.psum)
        t = nl.ndarray((4, 8), nl.bfloat16, buffer=nl.sbuf)
        nisa.tensor_copy(t, p, rounding="up")  # HERE
        return a
        """, "rounding must be"),
    "collective on one core": ("""\
        t = nl.ndarray((4, 8), nl.float32, buffer=nl.sbuf)
        ncc.all_reduce(t)  # HERE
        return a
        """, "--cores P >= 2"),
    "slice out of range": ("""\
        t = nl.ndarray((4, 8), nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(t[0:4, 0:8], x[0:4, 0:9])  # HERE
        return a
        """, "outside the column axis"),
    "output in SBUF": ("""\
        t = nl.ndarray((4, 8), nl.float32, buffer=nl.sbuf)
        return t  # HERE
        """, "must be a DRAM tensor"),
}


@pytest.mark.parametrize("case", list(ERRORS))
def test_errors_name_the_kernels_line(tmp_path, case):
    body, text = ERRORS[case]
    path, line = _kernel_file(tmp_path, body)
    with pytest.raises(KernelError) as info:
        run_kernel(path)
    err = info.value
    if case == "output in SBUF":  # raised after kernel() returned: its def line is named
        assert err.file == str(path), str(err)
    else:
        assert (err.file, err.line) == (str(path), line), str(err)
    assert text in err.reason, str(err)
    assert str(err).endswith(f":{err.line}: {err.reason}"), str(err)


def test_instructions_record_their_descriptors(tmp_path):
    """What each call records; a stationary tile is loaded once while it is unchanged, again
    after a write; a freed tile's words go to the next tile."""
    path, _ = _kernel_file(tmp_path, """\
        s = nl.ndarray((4, 4), nl.bfloat16, buffer=nl.sbuf)
        m = nl.ndarray((4, 8), nl.bfloat16, buffer=nl.sbuf)
        p = nl.ndarray((4, 8), nl.float32, buffer=nl.psum)
        nisa.dma_copy(s, a)
        nisa.nc_matmul(p, s, m)
        nisa.nc_matmul(p, s, m, accumulate=True)
        nisa.dma_copy(s, a)
        nisa.nc_matmul(p[0:4, 2:6], s, m[:, 0:4], accumulate=True)
        o = nl.ndarray((4, 8), nl.float32, buffer=nl.sbuf)
        nisa.activation(o, nl.relu, p, scale=2.0)
        nisa.set_seed(7)
        nisa.barrier()
        out = nl.ndarray((4, 8), nl.float32, buffer=nl.shared_hbm)
        nisa.dma_copy(out, o)
        return out
        """)
    k = trace_kernel(load_kernel(path)).kernels[0]
    ops = [Opcode(decode(w)[0]).name for w in k.program]
    assert ops == ["DMA_LOAD", "LOAD_STATIONARY", "MATMUL", "MATMUL", "DMA_LOAD",
                   "LOAD_STATIONARY", "MATMUL", "ACTIVATE", "SET_SEED", "BARRIER", "DMA_STORE"]
    fields = [decode(w)[1] for w in k.program]
    assert fields[3]["accumulate"] == 1 and fields[2]["accumulate"] == 0
    assert (fields[6]["psum_addr"], fields[6]["f"], fields[6]["sbuf_addr"]) == (2, 4, 4)
    assert fields[7]["scale"] == 0x40000000 and fields[7]["src_sbuf"] == 0
    assert fields[8]["seed"] == 7
    assert fields[10]["dram_addr"] == k.dram_tensors[-1].addr
    assert k.macs == 2 * 4 * 4 * 8 + 4 * 4 * 4
    assert all(line == (str(path), 0) or line[0] == str(path) for line in k.lines)


def test_tiles_are_freed_by_scope_and_by_rebinding(tmp_path):
    """A loop's tile is freed when its name is rebound, after the next one is made (two take
    turns: double buffering); one made in a scope is freed at the scope's end (one at a time);
    the kernel's end frees the rest."""
    path, _ = _kernel_file(tmp_path, """\
        turns = []
        for i in range(100):
            t = nl.ndarray((4, 100), nl.float32, buffer=nl.sbuf)
            turns.append(t.addr)
        del t
        once = []
        for i in range(100):
            with nl.scope():
                u = nl.ndarray((4, 200), nl.float32, buffer=nl.sbuf)
                once.append(u.addr)
        v = nl.ndarray((4, 256), nl.float32, buffer=nl.sbuf)
        assert turns[:4] == [0, 100, 0, 100] and set(once) == {0} and v.addr == 0
        return a
        """)
    run_kernel(path)


def test_api_outside_a_kernel_is_an_error():
    with pytest.raises(KernelError, match="only while a kernel is traced"):
        nl.ndarray((4, 4), nl.float32, buffer=nl.sbuf)
    with pytest.raises(KernelError, match="only while a kernel is traced"):
        nisa.barrier()


def _sequential_gemm(a, b, n):
    """C = A.T @ B as the contract orders it: per K tile of n rows, s = +0 then
    s = s + a[k, m] * b[k, f] in float32 (k increasing); PSUM p = s, then p = p + s."""
    a32, b32 = a.astype(np.float32), b.astype(np.float32)
    c = None
    for k0 in range(0, a.shape[0], n):
        s = np.zeros((a.shape[1], b.shape[1]), np.float32)
        for k in range(k0, min(k0 + n, a.shape[0])):
            s = (s + np.outer(a32[k], b32[k]).astype(np.float32)).astype(np.float32)
        c = s if c is None else (c + s).astype(np.float32)
    return c


def test_matmul_example_means_a_gemm():
    """docs/kernels/matmul.py on the ISS: bit for bit the contract's ordered fp32 sums (numpy
    float32, one product and one add at a time), and within float32 rounding of float64."""
    module = load_kernel("docs/kernels/matmul.py")
    for seed in (0, 1):
        ins = module.inputs(np.random.default_rng(seed))
        got = run_kernel("docs/kernels/matmul.py", seed=seed)["outputs"]["out"][0]
        want = _sequential_gemm(ins["a"], ins["b"], 4)
        assert np.array_equal(got.view(np.uint32), want.view(np.uint32)), f"seed {seed}"
        ref = module.reference(**ins)
        assert np.allclose(got, ref, rtol=1e-5, atol=1e-5 * np.abs(ref).max()), f"seed {seed}"


def test_data_parallel_example_every_core_ends_with_the_sum():
    """docs/kernels/data_parallel_matmul.py on a ring of four ISS cores: every core holds the
    same C, within float32 rounding of the float64 sum of the partial products."""
    module = load_kernel("docs/kernels/data_parallel_matmul.py")
    r = run_kernel("docs/kernels/data_parallel_matmul.py", seed=3)
    outs = r["outputs"]["out"]
    assert r["cores"] == 4 and len(outs) == 4
    assert all(np.array_equal(o.view(np.uint32), outs[0].view(np.uint32)) for o in outs)
    rng = np.random.default_rng(3)
    total = np.zeros(outs[0].shape)
    for rank in range(4):
        ins = module.inputs(rng, rank)
        total += ins["a"].astype(np.float64).T @ ins["b"].astype(np.float64)
    assert np.allclose(outs[0], total, rtol=1e-5, atol=1e-5 * np.abs(total).max())


def test_the_docs_error_is_what_the_tool_says():
    """docs/kernels.md shows the one-line error of docs/kernels/mistake.py as nclite prints it
    (from the repository root)."""
    with pytest.raises(KernelError) as info:
        run_kernel("docs/kernels/mistake.py")
    with open("docs/kernels.md") as fh:
        assert f"nclite: error: {info.value}" in fh.read(), str(info.value)


def test_cores_must_agree_on_their_collectives(tmp_path):
    """A core whose collective differs from core 0's (op or size) is an error at its line; a
    core that skips one is the links' timeout, at the line of the others' collective."""
    path = tmp_path / "ring.py"
    path.write_text(textwrap.dedent("""\
        from sim.kernels import ncc, nisa, nl

        CORES = 2

        def inputs(rng, rank):
            return {"x": rng.standard_normal((1, 4)).astype(nl.float32)}

        def kernel(x):
            t = nl.ndarray((1, 4), nl.float32, buffer=nl.sbuf)
            nisa.dma_copy(t, x)
            if nl.program_id(0) == 0:
                ncc.all_reduce(t)
            elif MODE == "other op":
                ncc.all_gather(t)  # HERE
            elif MODE == "other size":
                ncc.all_reduce(t[:, 0:3])  # HERE
            nisa.dma_copy(x, t)
            return x
        """))
    module = load_kernel(path)
    lines = [i + 1 for i, text in enumerate(path.read_text().splitlines()) if "# HERE" in text]
    for mode, line, text in (("other op", lines[0], "all_gather of 4 words"),
                             ("other size", lines[1], "all_reduce of 3 words")):
        module.MODE = mode
        with pytest.raises(KernelError) as info:
            run_kernel(module)
        assert (info.value.line, text in info.value.reason) == (line, True), str(info.value)
    module.MODE = "skip"
    with pytest.raises(KernelError, match="LINK_TIMEOUT") as info:
        run_kernel(module)
    assert info.value.line == lines[0] - 2, str(info.value)


def test_tensor_dtype_is_a_dtype():
    """The tracer's own tensors (the library's programs make theirs with it) take a dtype as the
    API does; a bare code is an error naming the tensor, not a crash later on."""
    from golden.iss import CoreConfig
    from sim.kernels.trace import Kernel

    k = Kernel(CoreConfig(), 0, 1)
    assert k.dram_tensor((4, 4), "bfloat16", "a").dtype == Dtype.BF16
    with pytest.raises(KernelError, match="b's dtype must be one of .*, not 0"):
        k.dram_tensor((4, 4), 0, "b")
    with pytest.raises(KernelError, match="t's dtype must be one of"):
        k.tile((4, 4), 3, nl.sbuf, "t")
