"""Random kernels for differential fuzzing (``test_kernel_fuzz.py``).

:func:`random_spec` draws a kernel: a core (N, SBUF, PSUM), a GEMM ``C = A.T @ B`` of random
shape and operand dtypes (special values included), its tiling (the tiles of K, M and F), and
an epilogue ``cast(op(C * scale + bias))`` of random function, scale, bias, output dtype,
rounding mode (SR after a seed) and saturation, taken from PSUM directly or through an fp32 SBUF
copy. :func:`source` writes it as a kernel file (``sim.kernels`` API; an illegal variant
changes one statement, marked ``# ILLEGAL``); :func:`meaning` states what the kernel computes
in plain numpy (float32 products and sums in the contract's order; the casts by the operator
model ``golden.rounding.round_fp32``, SR's draws by ``golden.prng``, in the engine's lane order),
independently of the tracer and the ISS. :func:`random_collective`, :func:`collective_source`
and :func:`collective_meaning` do the same for collectives on a ring of cores (chunks and the
order of the additions written out from the contract).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from golden.prng import LanePRNG
from golden.rounding import DEFAULT_SATURATE, round_fp32
from sim.kernels.trace import NUMPY_DTYPES
from sim.tb import vectors

OPERANDS = ("bf16", "fp8_e4m3", "fp8_e5m2")
OUTPUTS = ("bf16", "fp8_e4m3", "fp8_e5m2", "fp16", "fp32")
NL = {"bf16": "nl.bfloat16", "fp8_e4m3": "nl.float8_e4m3", "fp8_e5m2": "nl.float8_e5m2",
      "fp16": "nl.float16", "fp32": "nl.float32"}
_DTYPE = {name: NUMPY_DTYPES[d] for d, name in
          zip(NUMPY_DTYPES, ("bf16", "fp8_e4m3", "fp8_e5m2", "fp16", "fp32"), strict=True)}
SCALES = (1.0, 0.5, 2.0, -1.5, 3.0, 0.0)
#: The illegal variants: a name and what the error says.
ILLEGAL = {
    "partitions": "partitions",
    "k_mismatch": "must share K",
    "psum_wide": "one bank",
    "act_shape": "shapes differ",
    "dma_dtype": "dtypes differ",
    "sbuf_overflow": "SBUF overflow",
    "bias_shape": "bias must be one column",
}


@dataclass(frozen=True)
class Spec:
    n: int
    sbuf_words: int
    psum_banks: int
    psum_words: int
    m: int
    k: int
    f: int
    mt: int
    kt: int
    ft: int
    a_fmt: str
    b_fmt: str
    out: str
    op: str  # "copy" or "relu"
    scale: float
    bias: bool
    mode: str
    saturate: bool | None
    seed: int | None  # set_seed before the epilogues (None: the PRNG as after reset)
    via_sbuf: bool  # PSUM -> fp32 SBUF copy, then the epilogue from SBUF
    illegal: str | None = None

    @property
    def config(self) -> dict:
        return {"n": self.n, "sbuf_words": self.sbuf_words, "psum_banks": self.psum_banks,
                "psum_words": self.psum_words}


def random_spec(rng: np.random.Generator, *, illegal: str | None = None,
                core: dict | None = None) -> Spec:
    """A random kernel; ``core`` fixes the core (``n``, ``sbuf_words``, ``psum_banks``,
    ``psum_words``) instead of drawing one."""
    n = int(rng.integers(2, 5))
    psum_words = int(rng.choice([4, 8, 16]))
    sbuf_words, banks = int(rng.choice([64, 128, 256])), int(rng.choice([1, 2, 4]))
    if core is not None:
        n, psum_words = core["n"], core["psum_words"]
        sbuf_words, banks = core["sbuf_words"], core["psum_banks"]
    m, k, f = (int(rng.integers(1, 3 * n + 1)), int(rng.integers(1, 3 * n + 1)),
               int(rng.integers(1, 3 * psum_words + 1)))
    kt = int(rng.integers(1, n + 1))
    bias = bool(rng.random() < 0.5)
    if illegal == "k_mismatch":  # the first K tile has 2 rows or more, the moving one fewer
        k, kt = max(k, 2), max(kt, 2)
    bias = bias or illegal == "bias_shape"
    return Spec(
        n=n, sbuf_words=sbuf_words, psum_banks=banks, psum_words=psum_words, m=m, k=k, f=f,
        mt=int(rng.integers(1, n + 1)), kt=kt, ft=int(rng.integers(1, psum_words + 1)),
        a_fmt=str(rng.choice(OPERANDS)), b_fmt=str(rng.choice(OPERANDS)),
        out=str(rng.choice(OUTPUTS)), op=str(rng.choice(["copy", "relu"])),
        scale=float(rng.choice(SCALES)), bias=bias, mode=str(rng.choice(["rne", "rtz", "sr"])),
        saturate=[None, True, False][int(rng.integers(0, 3))],
        seed=int(rng.integers(0, 1 << 40)) if rng.random() < 0.7 else None,
        via_sbuf=bool(rng.random() < 0.3), illegal=illegal)


def inputs(spec: Spec, rng: np.random.Generator) -> dict:
    """A, B with special values (NaN, inf, zeros, subnormals, max) and an fp32 bias column."""
    a = vectors.operands(spec.a_fmt, rng, (spec.k, spec.m), 0.1)
    b = vectors.operands(spec.b_fmt, rng, (spec.k, spec.f), 0.1)
    size = {"bf16": np.uint16}.get
    ins = {"a": a.astype(size(spec.a_fmt, np.uint8)).view(_DTYPE[spec.a_fmt]),
           "b": b.astype(size(spec.b_fmt, np.uint8)).view(_DTYPE[spec.b_fmt])}
    if spec.bias:
        bias = vectors.operands("fp32", rng, (spec.m, 1), 0.1)
        ins["bias"] = bias.astype(np.uint32).view(np.float32)
    return ins


def source(spec: Spec) -> str:
    """The kernel file of ``spec``; its ``inputs`` returns the module's ``INPUTS`` (set it to
    :func:`inputs`' after loading). An illegal spec's one bad statement ends in ``# ILLEGAL``."""
    s, bad = spec, spec.illegal

    def mark(line: str, variant: str) -> str:
        return line + ("  # ILLEGAL" if bad == variant else "")

    sat = "None" if s.saturate is None else str(s.saturate)
    a_rows = "nl.tile_size.pmax + 1" if bad == "partitions" else "k1 - k0"
    moving = "bt[0:k1 - k0 - 1] if k1 - k0 > 1 else bt" if bad == "k_mismatch" else "bt"
    acc_cols = f"{s.psum_words} + 1" if bad == "psum_wide" else "f1 - f0"
    o_cols = "f1 - f0 + 1" if bad == "act_shape" else "f1 - f0"
    lines = [
        "from sim.kernels import nisa, nl",
        "",
        "INPUTS = {}",
        "",
        "def inputs(rng):",
        "    return INPUTS",
        "",
        f"def kernel({'a, b, bias' if s.bias else 'a, b'}):",
        f"    out = nl.ndarray(({s.m}, {s.f}), {NL[s.out]}, buffer=nl.shared_hbm)",
        f"    mt, kt, ft = {s.mt}, {s.kt}, {s.ft}",
    ]
    if bad == "sbuf_overflow":
        lines.append(mark(f"    hog = nl.ndarray((1, {s.sbuf_words} + 1), nl.float32, "
                          f"buffer=nl.sbuf)", bad))
    if s.seed is not None:
        lines.append(f"    nisa.set_seed({s.seed})")
    lines += [
        f"    for m0 in range(0, {s.m}, mt):",
        f"        m1 = min(m0 + mt, {s.m})",
        f"        for f0 in range(0, {s.f}, ft):",
        f"            f1 = min(f0 + ft, {s.f})",
        mark(f"            acc = nl.ndarray((m1 - m0, {acc_cols}), nl.float32, buffer=nl.psum)",
             "psum_wide"),
        f"            for k0 in range(0, {s.k}, kt):",
        f"                k1 = min(k0 + kt, {s.k})",
        mark(f"                at = nl.ndarray(({a_rows}, m1 - m0), {NL[s.a_fmt]}, "
             f"buffer=nl.sbuf)", "partitions"),
        f"                bt = nl.ndarray((k1 - k0, f1 - f0), "
        f"{NL['fp32' if bad == 'dma_dtype' else s.b_fmt]}, buffer=nl.sbuf)",
        "                nisa.dma_copy(at, a[k0:k1, m0:m1])",
        mark("                nisa.dma_copy(bt, b[k0:k1, f0:f1])", "dma_dtype"),
        mark(f"                nisa.nc_matmul(acc, at, {moving}, accumulate=k0 > 0)",
             "k_mismatch"),
        "                del at, bt",
    ]
    src, bias = "acc", "None"
    if s.via_sbuf:
        lines += ["            wide = nl.ndarray((m1 - m0, f1 - f0), nl.float32, buffer=nl.sbuf)",
                  "            nisa.tensor_copy(wide, acc)"]
        src = "wide"
    if s.bias:
        cols = 2 if bad == "bias_shape" else 1
        lines += [f"            bb = nl.ndarray((m1 - m0, {cols}), nl.float32, buffer=nl.sbuf)",
                  "            nisa.dma_copy(bb[:, 0:1], bias[m0:m1])"]
        bias = "bb"
    lines += [
        f"            o = nl.ndarray((m1 - m0, {o_cols}), {NL[s.out]}, buffer=nl.sbuf)",
        mark(f"            nisa.activation(o, nl.{s.op}, {src}, bias={bias}, scale={s.scale!r}, "
             f"rounding={s.mode!r}, saturate={sat})", "act_shape" if bad == "act_shape"
             else "bias_shape"),
        "            nisa.dma_copy(out[m0:m1, f0:f1], o[:, 0:f1 - f0])",
        "            del " + ", ".join(["acc", "o", *(["wide"] if s.via_sbuf else []),
                                    *(["bb"] if s.bias else [])])
        + "  # freed before the next are made (PSUM or SBUF may hold one only)",
        "    return out",
    ]
    return "\n".join(lines) + "\n"


def _f32(bits) -> np.ndarray:
    return np.asarray(bits, dtype=np.uint32).view(np.float32)


def meaning(spec: Spec, ins: dict, random_bits: int = 16) -> np.ndarray:
    """What the kernel computes, as the bit patterns of ``out`` (uint32, zero-extended)."""
    s = spec
    a = ins["a"].astype(np.float32)
    b = ins["b"].astype(np.float32)
    out = np.zeros((s.m, s.f), dtype=np.uint32)
    prng = LanePRNG(s.n, s.seed or 0)
    saturate = DEFAULT_SATURATE[s.out] if s.saturate is None else s.saturate
    neg_zero = np.float32(-0.0)
    with np.errstate(all="ignore"):
        for m0 in range(0, s.m, s.mt):
            m1 = min(m0 + s.mt, s.m)
            for f0 in range(0, s.f, s.ft):
                f1 = min(f0 + s.ft, s.f)
                acc = None
                for k0 in range(0, s.k, s.kt):
                    part = np.zeros((m1 - m0, f1 - f0), np.float32)  # s = +0.0
                    for kk in range(k0, min(k0 + s.kt, s.k)):
                        part = part + np.multiply.outer(a[kk, m0:m1], b[kk, f0:f1])
                    acc = part if acc is None else acc + part
                bias = ins["bias"][m0:m1] if s.bias else neg_zero  # (rows, 1) or -0
                y = acc * np.float32(s.scale) + bias
                if s.op == "relu":
                    y = np.where((y > 0) | np.isnan(y), y, np.float32(0.0))
                lanes = np.zeros((f1 - f0, s.n), np.uint32)  # beats x lanes, +0 off the tile
                lanes[:, :m1 - m0] = y.astype(np.float32).view(np.uint32).T
                fmt = "fp32" if s.out == "fp32" else s.out
                rows = []
                for beat in lanes:
                    if s.mode == "sr" and fmt != "fp32":
                        rbits = prng.draws(1, random_bits)[0]
                        rows.append(round_fp32(beat, fmt, "sr", saturate=saturate,
                                               rbits=rbits, r=random_bits))
                    else:
                        rows.append(round_fp32(beat, fmt, s.mode, saturate=saturate))
                out[m0:m1, f0:f1] = np.array(rows)[:, :m1 - m0].T
    return out


def bits_equal(got: np.ndarray, want_bits: np.ndarray, fmt: str) -> np.ndarray:
    """Where ``got`` (the kernel's output array) equals ``want_bits``, any NaN matching any."""
    size = got.dtype.itemsize
    g = got.view(f"u{size}").astype(np.uint32)
    w = np.asarray(want_bits, np.uint32)
    nan_g = np.isnan(got.astype(np.float32))
    nan_w = np.isnan(w.astype(f"u{size}").view(got.dtype).astype(np.float32))
    return (g == w) | (nan_g & nan_w)


# --- collectives --------------------------------------------------------------------------------

COLLECTIVES = ("all_reduce", "reduce_scatter", "all_gather")


@dataclass(frozen=True)
class CollectiveSpec:
    ranks: int
    n: int
    link_width: int
    op: str
    rows: int  # partitions of the tile (a multiple of link_width; exactly it but for all_reduce)
    cols: int
    part: int  # the tile view's first partition

    @property
    def config(self) -> dict:
        return {"n": self.n, "link_width": self.link_width, "sbuf_words": 64, "psum_banks": 2,
                "psum_words": 8, "dram_bytes": 4096}


def random_collective(rng: np.random.Generator, *, core: dict | None = None,
                      ranks: int | None = None) -> CollectiveSpec:
    """A random collective kernel; ``core`` (``n``, ``link_width``) and ``ranks`` fix the ring
    instead of drawing one."""
    if core is None:
        n = int(rng.integers(2, 5))
        w = int(rng.choice([x for x in (1, 2, 4) if x <= n]))
    else:
        n, w = core["n"], core["link_width"]
    op = str(rng.choice(COLLECTIVES))
    bands = int(rng.integers(1, n // w + 1)) if op == "all_reduce" else 1
    rows = bands * w
    return CollectiveSpec(ranks=ranks or int(rng.integers(2, 5)), n=n, link_width=w, op=op,
                          rows=rows, part=int(rng.integers(0, n - rows + 1)),
                          cols=int(rng.integers(1, 21)))


def collective_source(spec: CollectiveSpec) -> str:
    s = spec
    return "\n".join([
        "from sim.kernels import ncc, nisa, nl",
        "",
        "INPUTS = []",
        "",
        "def inputs(rng, rank):",
        "    return INPUTS[rank]",
        "",
        "def kernel(x):",
        f"    out = nl.ndarray(({s.rows}, {s.cols}), nl.float32, buffer=nl.shared_hbm)",
        f"    t = nl.ndarray(({s.n}, {s.cols}), nl.float32, buffer=nl.sbuf)",
        f"    v = t[{s.part}:{s.part + s.rows}]",
        "    nisa.dma_copy(v, x)",
        f"    ncc.{s.op}(v)",
        "    nisa.dma_copy(out, v)",
        "    return out",
    ]) + "\n"


def collective_inputs(spec: CollectiveSpec, rng: np.random.Generator) -> list[dict]:
    return [{"x": vectors.operands("fp32", rng, (spec.rows, spec.cols), 0.1).astype(np.uint32)
             .view(np.float32)} for _ in range(spec.ranks)]


def _chunks(words: int, beat: int, ranks: int) -> list[tuple[int, int]]:
    """Chunk c's words [lo, hi): the buffer's ceil(words / beat) beats in P near-equal runs,
    the first (beats mod P) one beat longer."""
    # lab4 hide begin: chunks
    beats = -(-words // beat)
    q, e = divmod(beats, ranks)
    out, first = [], 0
    for c in range(ranks):
        end = first + q + (c < e)
        out.append((min(beat * first, words), min(beat * end, words)))
        first = end
    return out
    # lab4 hide end: chunks


def collective_meaning(spec: CollectiveSpec, ins: list[dict]) -> tuple[list, list]:
    """Each rank's output tile (fp32 bit patterns) and a mask of the words it is defined at:
    all-reduce - every word the sum over the ranks, starting after the chunk's owner
    ``((x[c+1] + x[c+2]) + ...) + x[c]`` in float32; reduce-scatter - rank r's chunk r that sum
    (its other chunks hold the ring's partial sums: not stated here); all-gather - chunk c of
    every rank is rank c's chunk c. Band by band of ``link_width`` partitions, word i of a band
    at partition i mod W, column i div W."""
    s, P, w = spec, spec.ranks, spec.link_width
    outs = [np.array(d["x"], dtype=np.float32).copy() for d in ins]
    defined = [np.zeros((s.rows, s.cols), bool) for _ in range(P)]
    with np.errstate(all="ignore"):
        for b0 in range(0, s.rows, w):
            bufs = [d["x"][b0:b0 + w].T.reshape(-1).astype(np.float32) for d in ins]
            res = [buf.copy() for buf in bufs]
            mask = [np.zeros(buf.size, bool) for buf in bufs]
            for c, (lo, hi) in enumerate(_chunks(bufs[0].size, w, P)):
                total = bufs[(c + 1) % P][lo:hi].copy()
                for j in range(2, P + 1):
                    total = total + bufs[(c + j) % P][lo:hi]
                for r in range(P):
                    if s.op == "all_reduce" or (s.op == "reduce_scatter" and r == c):
                        res[r][lo:hi], mask[r][lo:hi] = total, True
                    elif s.op == "all_gather":
                        res[r][lo:hi], mask[r][lo:hi] = bufs[c][lo:hi], True
            for r in range(P):
                outs[r][b0:b0 + w] = res[r].reshape(s.cols, w).T
                defined[r][b0:b0 + w] = mask[r].reshape(s.cols, w).T
    return [o.view(np.uint32) for o in outs], defined
