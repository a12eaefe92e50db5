"""``ncc.all_to_all`` and ``ncc.permute`` (sim/kernels/collectives.py): small kernels on rings
of ISS cores against golden.collective's ``all_to_all`` / ``permute`` applied to the inputs
(the words each tile holds: an element's bit pattern, zero-extended), and every KernelError
the two calls raise, at the kernel's line. (RTL runs belong with the engine's tests.)
Seed: ``NCLITE_SEED``.
"""

from __future__ import annotations

import textwrap

import numpy as np
import pytest

from golden.collective import all_to_all, chunk_beats, permute
from golden.isa import CollectiveOp, Opcode, decode
from sim.kernels import KernelError, load_kernel, run_kernel, trace_kernel

UINT = {"float32": np.uint32, "bfloat16": np.uint16, "float8_e4m3": np.uint8}

KERNEL = """\
import numpy as np
from sim.kernels import ncc, nisa, nl
from sim.kernels.run import DEFAULT_CONFIG

CORES = {cores}
CONFIG = {{**DEFAULT_CONFIG, "link_width": {w}}}
W, C, OUT, PART = {w}, {cols}, {out}, {part}
DT = nl.{dtype}


def inputs(rng, rank):
    bits = rng.integers(0, 1 << {bits}, (W, C + OUT), dtype=np.uint64).astype(np.{uint})
    bits[:, :3] = np.array([{specials}], np.{uint})[:3]  # NaN payload, inf, -0 (as bits)
    return {{"x": bits[:, :C].view(DT), "fill": bits[:, C:].view(DT)}}


def kernel(x, fill):
    out = nl.ndarray((W, OUT), DT, buffer=nl.shared_hbm)
    back = nl.ndarray((W, C), DT, buffer=nl.shared_hbm)
    pad = nl.ndarray((4, 1 + 2 * nl.program_id(0)), DT, buffer=nl.sbuf)  # places differ
    src = nl.ndarray((PART + W, C), DT, buffer=nl.sbuf)
    dst = nl.ndarray((PART + W, OUT), DT, buffer=nl.sbuf)
    nisa.dma_copy(src[PART:PART + W, :], x)
    nisa.dma_copy(dst[PART:PART + W, :], fill)
    {call}
    nisa.dma_copy(out, dst[PART:PART + W, :])
    nisa.dma_copy(back, src[PART:PART + W, :])
    return out, back
"""
SPECIALS = {"float32": "0x7FA00001, 0xFF800000, 0x80000000", "bfloat16": "0x7F81, 0xFF80, 0x8000",
            "float8_e4m3": "0x7F, 0xFF, 0x80"}


def _write(tmp_path, name, *, cores, w, cols, out, call, dtype="float32", part=0):
    uint = UINT[dtype]
    path = tmp_path / f"{name}.py"
    path.write_text(KERNEL.format(cores=cores, w=w, cols=cols, out=out, part=part, call=call,
                                  dtype=dtype, uint=np.dtype(uint).name,
                                  bits=8 * np.dtype(uint).itemsize,
                                  specials=SPECIALS[dtype]))
    return path


def _words(a: np.ndarray, dtype: str) -> np.ndarray:
    """A (W, C) array's buffer: word i = element [i % W, i // W] (its bits, zero-extended)."""
    return a.view(UINT[dtype]).astype(np.uint32).T.reshape(-1)


def _tile(words: np.ndarray, w: int, dtype: str) -> np.ndarray:
    return words.astype(UINT[dtype]).reshape(-1, w).T


@pytest.mark.parametrize(("cores", "w", "cols", "dtype", "part"), [
    (2, 1, 5, "float32", 0), (3, 2, 7, "bfloat16", 2), (4, 1, 2, "float32", 1),
    (4, 4, 9, "float8_e4m3", 0), (3, 1, 12, "float32", 3)])
def test_all_to_all_kernel(tmp_path, cores, w, cols, dtype, part, seed):
    out = cores * -(-cols // cores)
    path = _write(tmp_path, "a2a", cores=cores, w=w, cols=cols, out=out, dtype=dtype, part=part,
                  call="ncc.all_to_all(src[PART:PART + W, :], dst[PART:PART + W, :])")
    module = load_kernel(path)
    r = run_kernel(path, seed=seed)
    rng = np.random.default_rng(seed)
    ins = [module.inputs(rng, rank) for rank in range(cores)]
    bufs = [_words(i["x"], dtype) for i in ins]
    beats = chunk_beats(cols, cores)
    for j, slots in enumerate(all_to_all(bufs, w)):
        want = _words(ins[j]["fill"], dtype)
        b = beats[j + 1] - beats[j]
        for i, words in enumerate(slots):
            want[i * b * w:i * b * w + words.size] = words
        got = r["outputs"]["out0"][j]
        assert np.array_equal(got.view(UINT[dtype]), _tile(want, w, dtype)), (seed, j)
        back = r["outputs"]["out1"][j]
        assert np.array_equal(back.view(UINT[dtype]), ins[j]["x"].view(UINT[dtype])), seed
    prog = trace_kernel(module, seed=seed).kernels[1].program
    colls = [decode(x)[1] for x in prog if decode(x)[0] == Opcode.COLLECTIVE]
    assert [(f["coll_op"], f["part"], f["rows"], f["cols"]) for f in colls] == \
        [(CollectiveOp.ALL_TO_ALL, part, w, cols)]


@pytest.mark.parametrize(("cores", "w", "cols", "dtype"), [
    (2, 1, 3, "float32"), (3, 2, 5, "bfloat16"), (4, 4, 2, "float32"), (5, 1, 4, "float8_e4m3")])
def test_permute_kernel(tmp_path, cores, w, cols, dtype, seed):
    for shift in range(1, cores):
        path = _write(tmp_path, f"permute{shift}", cores=cores, w=w, cols=cols, out=cols,
                      dtype=dtype, call=f"ncc.permute(src, dst, {shift})", part=0)
        module = load_kernel(path)
        r = run_kernel(path, seed=seed)
        rng = np.random.default_rng(seed)
        ins = [module.inputs(rng, rank) for rank in range(cores)]
        moved = permute([_words(i["x"], dtype) for i in ins], shift)
        for j in range(cores):
            got = r["outputs"]["out0"][j].view(UINT[dtype])
            assert np.array_equal(got, _tile(moved[j], w, dtype)), (seed, shift, j)
            assert np.array_equal(got, ins[(j - shift) % cores]["x"].view(UINT[dtype]))


ERRORS = {
    "one core": (1, "ncc.all_to_all(src, dst)", "needs a ring of cores"),
    "psum src": (2, "p = nl.ndarray((1, 4), nl.float32, buffer=nl.psum)\n"
                    "ncc.all_to_all(p, dst)", "src must be an SBUF tile"),
    "dtype": (2, "d = nl.ndarray((1, 4), nl.bfloat16, buffer=nl.sbuf)\n"
                 "ncc.permute(src, d, 1)", "dst must have src's dtype (fp32)"),
    "partitions": (2, "s = nl.ndarray((2, 4), nl.float32, buffer=nl.sbuf)\n"
                      "d = nl.ndarray((2, 4), nl.float32, buffer=nl.sbuf)\n"
                      "ncc.all_to_all(s, d)", "exactly the link width's 1 partitions, not 2"),
    "a2a dst shape": (3, "d = nl.ndarray((1, 4), nl.float32, buffer=nl.sbuf)\n"
                         "ncc.all_to_all(src, d)",
                      "dst must be (1, 6) (P x ceil(4 / P) = 6 columns for P = 3 cores)"),
    "permute dst shape": (3, "ncc.permute(src, dst, 1)", "dst must be (1, 4) (src's 4"),
    "other partition": (2, "s = nl.ndarray((2, 4), nl.float32, buffer=nl.sbuf)\n"
                           "ncc.permute(s[0:1, :], s[1:2, :], 1)",
                        "dst must be on src's partitions 0..0"),
    "overlap": (2, "s = nl.ndarray((1, 12), nl.float32, buffer=nl.sbuf)\n"
                   "ncc.all_to_all(s[:, 0:4], s[:, 3:7])", "dst shares SBUF words with src"),
    "shift 0": (3, "ncc.permute(src, src2, 0)", "shift must be an integer in 1..2"),
    "shift P": (3, "ncc.permute(src, src2, 3)", "shift must be an integer in 1..2"),
    "shift float": (3, "ncc.permute(src, src2, 1.0)", "shift must be an integer in 1..2"),
    "shift bool": (3, "ncc.permute(src, src2, True)", "shift must be an integer in 1..2"),
    "not a tile": (2, "ncc.all_to_all(src, 3)", "dst must be a tensor"),
}

ERROR_KERNEL = """\
from sim.kernels import ncc, nisa, nl

CORES = {cores}


def inputs(rng, rank):
    return {{"x": rng.standard_normal((1, 4)).astype(nl.float32)}}


def kernel(x):
    src = nl.ndarray((1, 4), nl.float32, buffer=nl.sbuf)
    src2 = nl.ndarray((1, 4), nl.float32, buffer=nl.sbuf)
    dst = nl.ndarray((1, 8), nl.float32, buffer=nl.sbuf)
{body}  # HERE
    return x
"""


@pytest.mark.parametrize("case", list(ERRORS))
def test_kernel_errors(tmp_path, case):
    cores, body, text = ERRORS[case]
    path = tmp_path / "bad.py"
    path.write_text(ERROR_KERNEL.format(cores=cores, body=textwrap.indent(body, "    ")))
    line = next(i + 1 for i, t in enumerate(path.read_text().splitlines()) if "# HERE" in t)
    with pytest.raises(KernelError) as info:
        run_kernel(path)
    assert (info.value.file, info.value.line) == (str(path), line), str(info.value)
    assert text in info.value.reason, str(info.value)


def test_cores_must_agree_on_the_shift(tmp_path):
    """A permute whose shift differs from core 0's is an error at that core's line (the ISS
    would raise: the hardware's outcome is not defined); different places are fine."""
    path = tmp_path / "shift.py"
    path.write_text(textwrap.dedent("""\
        from sim.kernels import ncc, nisa, nl

        CORES = 3

        def inputs(rng, rank):
            return {"x": rng.standard_normal((1, 4)).astype(nl.float32)}

        def kernel(x):
            pad = nl.ndarray((1, 1 + nl.program_id(0)), nl.float32, buffer=nl.sbuf)
            t = nl.ndarray((1, 4), nl.float32, buffer=nl.sbuf)
            u = nl.ndarray((1, 4), nl.float32, buffer=nl.sbuf)
            nisa.dma_copy(t, x)
            if nl.program_id(0) == 2 and SHIFTED:
                ncc.permute(t, u, 2)  # HERE
            else:
                ncc.permute(t, u, 1)
            nisa.dma_copy(x, u)
            return x
        """))
    module = load_kernel(path)
    line = next(i + 1 for i, t in enumerate(path.read_text().splitlines()) if "# HERE" in t)
    module.SHIFTED = False
    r = run_kernel(module, seed=1)
    rng = np.random.default_rng(1)
    ins = [module.inputs(rng, q)["x"] for q in range(3)]
    for j in range(3):
        assert np.array_equal(r["outputs"]["out"][j], ins[(j - 1) % 3])
    module.SHIFTED = True
    with pytest.raises(KernelError) as info:
        run_kernel(module)
    assert info.value.line == line, str(info.value)
    assert "permute by 2 of 4 words, core 0's permute by 1 of 4 words" in info.value.reason
