"""golden.rounding bf16 SR cross-checked against pychop's classic chop fed the same random bits.

Reference: pychop 0.6.2's classic NumPy chop, ``pychop.np.Chop_`` (the implementation the
public ``pychop.FaultChop`` front end dispatches to for NumPy arrays; a port of Higham's MATLAB
``chop``), with ``prec="bf16"`` (t = 8 significand bits, emax = 127), ``rmode=5`` ("round to
the next larger or next smaller floating-point number with probability proportional to the
distance"), ``subnormal=True``, ``explim=1``, ``flip=False``. Its documented ``randfunc``
argument ("the random numbers used for rounding ... will be generated using that function";
default ``np.random.uniform(0, 1, n)``) is where our random bits go in.

What pychop's rmode 5 does (``_chop_stochastic_rounding`` / ``stochastic_rounding``, all in
float64): with ``e = frexp(|x|)[1] - 1`` it splits the elements into a "subnormal" part
(``-133 <= e < -126``), scaled by ``2**133``, and a "normal" part (everything else, zeros
included), scaled by ``2**(7 - e)``; for each part it calls ``randfunc(n)`` once (n = part
size; not at all when every scaled value is an integer), and with ``y`` the scaled magnitude and
``frac = y - floor(y)`` it takes ``ceil(y)`` iff ``rnd <= frac``, else ``floor(y)``, then
rescales and restores the sign. Finally it clamps finite values above bf16 max to +-max and sets
every result with ``|y| < 2**-133`` to ``+0``.

Same random bits: for our r-bit ``R`` we feed ``u = (2**r - R) / 2**r`` (for ``R = 0``, where
that is 1, the largest double below 1 instead, to stay in the documented ``[0, 1)``).
Proof of equivalence: the scaled fp32 magnitude is exact in float64, so ``frac = D / 2**d``
exactly, with D, d as in golden.rounding; ``u`` is exact as well (``r <= 32``). Put
``K = 2**r - R`` (an integer in ``[1, 2**r]``) and ``F = floor(frac * 2**r) = (D << r) >> d``.
pychop rounds up iff ``K <= frac * 2**r`` iff (K being an integer) ``K <= F`` iff
``F + R >= 2**r``, which is our rule, the truncation of D to r bits included. For ``R = 0``
neither rounds up (``frac <= 1 - 2**-23 < 1 - 2**-53``). Elementwise random numbers reach the
right elements because we call pychop once per part (normal, subnormal) and the ``randfunc``
checks it is called at most once with exactly that part's size (boolean indexing keeps order).

pychop's limits, and what is therefore excluded or normalised here:

* fp32 magnitudes in ``[2**-149, 2**-133)`` (below bf16's smallest subnormal) are excluded:
  pychop puts them in its "normal" part, rounds them at 8 significant bits of their own binade
  and then flushes everything below ``2**-133`` to zero, which is not SR to the bf16 grid
  (ours rounds them up to ``2**-133`` with probability ``|x| / 2**-133``). Shown below.
* +-inf and NaN are excluded from the cross-check: pychop has no rule for them (they flow through
  ``inf - floor(inf)`` = NaN arithmetic with RuntimeWarnings and come out as +-inf / NaN); only
  their pass-through is recorded below, against ours with ``saturate=False``.
* Overflow: pychop's SR clamps finite overflow to +-max (Higham's ``chop`` does the same for
  stochastic rounding), so finite inputs are compared with ``saturate=True``; the top binade is
  sampled densely.
* Zero signs: pychop returns ``+0`` for ``-0.0`` and for negative values that round to zero
  (ours keeps ``-0``), so zero results are compared as unsigned zero.
* ``subnormal`` must be passed: pychop defaults it to False (flush) for ``prec`` ``"b"`` /
  ``"bfloat16"`` but True for ``"bf16"``.
* ``Chop_()`` calls ``np.random.seed(random_state)`` (global RNG): saved and restored here.
* pychop returns float64: every result is checked to be finite and exactly a bf16 value before
  ``ml_dtypes.bfloat16`` turns it into bit patterns.
* pychop's newer ``pychop.Chop`` (LightChop_) draws from a private ``default_rng`` with no way to
  inject numbers (and uses ``prob < fraction``); it is not used.

Data: 2**17 fp32 values (wide exponent range with random low bits, bf16 subnormal range, exact
bf16 values which must not move, few-low-bit values, the overflow binade, zeros), a quarter of
them with ``R`` on the exact up/down boundary, for r in (1, 8, 16, 32). Negative controls: the
flipped mapping ``u = R / 2**r``, the off-by-one mapping ``u = (2**r - 1 - R) / 2**r``,
independent random bits and our RTZ all give many mismatches. Seed: ``NCLITE_SEED`` (default 1).
"""

import os

import ml_dtypes
import numpy as np
import pytest
from pychop.np import Chop_

from golden.rounding import round_fp32
from sim.tb.vectors import seeded_rng

SEED = int(os.environ.get("NCLITE_SEED", "1"))
N = 1 << 17
R_VALUES = (1, 8, 16, 32)
BF16_MAX_BITS = 0x7F7F
#: fp32 magnitude bits of 2**-133, bf16's smallest subnormal (an fp32 subnormal).
MIN_SUB_MAG = 0x00010000
INF_MAG = 0x7F800000
BELOW_ONE = float(np.nextafter(1.0, 0.0))



def _in_domain(bits: np.ndarray) -> np.ndarray:
    """Where pychop's rmode 5 defines SR to bf16: finite, and zero or ``|x| >= 2**-133``."""
    mag = np.asarray(bits, dtype=np.uint32) & np.uint32(0x7FFFFFFF)
    return (mag < INF_MAG) & ((mag == 0) | (mag >= MIN_SUB_MAG))


def _to_f64(bits: np.ndarray) -> np.ndarray:
    return np.asarray(bits, dtype=np.uint32).view(np.float32).astype(np.float64)


def _sample(rng: np.random.Generator) -> np.ndarray:
    """N fp32 bit patterns, all in the domain, mixing the categories of the module docstring."""
    def sign(n):
        return rng.integers(0, 2, n, dtype=np.uint32) << np.uint32(31)

    def field(lo, hi, n):
        return rng.integers(lo, hi + 1, n, dtype=np.uint32)

    def man(n):
        return rng.integers(0, 1 << 23, n, dtype=np.uint32)

    n = N // 9
    wide = sign(3 * n) | (field(1, 254, 3 * n) << np.uint32(23)) | man(3 * n)
    # fp32 subnormals in [2**-133, 2**-126) and normals just above: bf16's subnormal range.
    sub = sign(n) | rng.integers(MIN_SUB_MAG, 1 << 23, n, dtype=np.uint32)
    near = sign(n) | (field(1, 9, n) << np.uint32(23)) | man(n)
    # exact bf16 values (normal and subnormal): low 16 bits clear.
    exact = wide[:n] & np.uint32(0xFFFF0000)
    exact[: n // 4] = (sub[: n // 4] & np.uint32(0xFFFF0000)) | np.uint32(MIN_SUB_MAG)
    # few low bits: ties, single LSBs, all-ones below the bf16 LSB.
    lows = np.array([0x8000, 0x0001, 0xFFFF, 0x8001, 0x7FFF, 0x4000], dtype=np.uint32)
    few = (wide[n: 2 * n] & np.uint32(0xFFFF0000)) | rng.choice(lows, n)
    few[: n // 4] = (sub[: n // 4] & np.uint32(0xFFFF0000)) | rng.choice(lows, n // 4)
    # the top binade (field 254), mostly its last bf16 ulp: overflow when rounding up.
    top = sign(n) | np.uint32(254 << 23) | man(n)
    top[: n // 2] |= np.uint32(0x007F0000)
    rest = N - (3 * n + 5 * n)
    zeros = sign(rest)  # +-0.0
    zeros[rest // 2:] = sign(rest - rest // 2) | np.uint32(MIN_SUB_MAG)  # +-2**-133
    out = np.concatenate([wide, sub, near, exact, few, top, zeros])
    return out[rng.permutation(out.size)]


def _frac_times(bits: np.ndarray, r: int) -> np.ndarray:
    """``floor(frac * 2**r)`` in float64 (frac: the part of |x| below the bf16 LSB, in ulps)."""
    a = np.abs(_to_f64(bits))
    e = np.frexp(a)[1] - 1
    y = np.ldexp(a, 7 - np.maximum(e, -126))
    return np.floor(np.ldexp(y - np.floor(y), r)).astype(np.int64)


def _random_r(rng: np.random.Generator, bits: np.ndarray, r: int) -> np.ndarray:
    """Uniform r-bit R, a quarter of them put on the round-up boundary (R = 2**r - F) or one
    below it (R = 2**r - F - 1; for exact values that is R = 2**r - 1, the largest)."""
    rb = rng.integers(0, 1 << r, bits.size, dtype=np.int64)
    edge = (1 << r) - _frac_times(bits, r) - rng.integers(0, 2, bits.size)
    pick = (rng.random(bits.size) < 0.25) & (edge >= 0) & (edge < (1 << r))
    rb[pick] = edge[pick]
    return rb


def _pychop_sr(x: np.ndarray, u: np.ndarray) -> np.ndarray:
    """pychop classic chop, bf16, rmode 5, element i of ``x`` rounded with random number u[i]."""
    a = np.abs(x)
    e = np.frexp(a)[1] - 1
    sub = (e >= -133) & (e < -126)  # pychop's "subnormal" part (explim=1)
    out = np.empty_like(x)
    state = np.random.get_state()
    try:
        for part in (~sub, sub):
            if not part.any():
                continue
            feed, size = [u[part]], int(part.sum())

            def randfunc(n, feed=feed, size=size):
                assert feed, "pychop called randfunc more than once per part"
                assert n == size, f"pychop asked for {n} random numbers, part has {size}"
                return feed.pop()

            chop = Chop_("bf16", subnormal=True, rmode=5, flip=False, explim=1,
                         randfunc=randfunc)
            out[part] = chop(x[part])
    finally:
        np.random.set_state(state)
    return out


def _bf16_bits(y: np.ndarray) -> np.ndarray:
    """Exact bf16 bit patterns of pychop's float64 results, zero sign dropped."""
    assert np.all(np.isfinite(y)), "pychop returned a non-finite value in the domain"
    b = y.astype(ml_dtypes.bfloat16)
    bad = b.astype(np.float64) != y
    assert not bad.any(), f"pychop result not a bf16 value: {y[bad][:4]!r} (seed {SEED})"
    return _unsigned_zero(b.view(np.uint16))


def _unsigned_zero(bits: np.ndarray) -> np.ndarray:
    return np.where((bits & 0x7FFF) == 0, 0, bits).astype(np.uint16)


def _u_same_bits(rb: np.ndarray, r: int) -> np.ndarray:
    return np.minimum(((1 << r) - rb) / float(1 << r), BELOW_ONE)


def _ours(bits, rb, r, saturate=True):
    return round_fp32(bits, "bf16", "sr", saturate=saturate, rbits=rb, r=r)


def _diff(ours: np.ndarray, theirs: np.ndarray, bits: np.ndarray, rb: np.ndarray) -> str:
    idx = np.flatnonzero(ours != theirs)[:5]
    rows = ", ".join(f"x={int(bits[i]):#010x} R={int(rb[i]):#x} ours={int(ours[i]):#06x} "
                     f"pychop={int(theirs[i]):#06x}" for i in idx)
    return f"{np.count_nonzero(ours != theirs)} mismatches (seed {SEED}): {rows}"


@pytest.fixture(scope="module", params=R_VALUES, ids=[f"r{r}" for r in R_VALUES])
def case(request):
    r = request.param
    rng = seeded_rng("pychop-bf16-sr", r)
    bits = _sample(rng)
    rb = _random_r(rng, bits, r)
    return r, bits, rb, _to_f64(bits)


def test_domain_filter():
    """The domain is exactly: finite, and zero or |x| >= 2**-133 (bf16's smallest subnormal)."""
    inside = [0x00000000, 0x80000000, MIN_SUB_MAG, 0x80000000 | MIN_SUB_MAG, 0x007FFFFF,
              0x00800000, 0x3F800001, 0x7F7FFFFF, 0xFF7FFFFF]
    outside = [0x00000001, 0x8000FFFF, MIN_SUB_MAG - 1, 0x7F800000, 0xFF800000, 0x7FC00000,
               0xFFFFFFFF, 0x7F800001]
    assert _in_domain(np.array(inside, dtype=np.uint32)).all()
    assert not _in_domain(np.array(outside, dtype=np.uint32)).any()
    assert _to_f64(np.array([MIN_SUB_MAG], dtype=np.uint32))[0] == 2.0 ** -133


def test_sr_matches_pychop(case):
    r, bits, rb, x = case
    assert bits.size >= 100_000
    assert _in_domain(bits).all(), f"sample left the domain (seed {SEED})"
    ours = _ours(bits, rb, r)
    theirs = _bf16_bits(_pychop_sr(x, _u_same_bits(rb, r)))
    assert np.array_equal(_unsigned_zero(ours), theirs), _diff(ours, theirs, bits, rb)

    # exact bf16 inputs are fixed points of both, even for R = 2**r - 1
    exact = (bits & 0xFFFF) == 0
    assert exact.sum() > N // 10 and (rb[exact] == (1 << r) - 1).sum() > 100
    assert np.array_equal(ours[exact], (bits[exact] >> 16).astype(np.uint16)), f"seed {SEED}"
    # coverage: both directions, the boundary, subnormal part, overflow, zeros
    mag = bits & 0x7FFFFFFF
    truncated = ours == (bits >> 16)
    assert (~truncated).sum() > N // 10 and (truncated & ~exact).sum() > N // 10
    on_edge = ~exact & (mag < 0x7F7F0000) & (rb == (1 << r) - _frac_times(bits, r))
    assert on_edge.sum() > 1000 and not truncated[on_edge].any(), f"seed {SEED}"
    assert ((mag >= MIN_SUB_MAG) & (mag < 0x00800000)).sum() > N // 10
    assert ((mag > 0x7F7F0000) & (mag < INF_MAG)).sum() > 1000
    assert (ours[mag > 0x7F7F0000] & 0x7FFF == BF16_MAX_BITS).all()
    assert (mag == 0).sum() > 100


def test_negative_controls(case):
    """The comparison detects a flipped, an off-by-one or an unrelated feed, and RTZ."""
    r, bits, rb, x = case
    ours = _unsigned_zero(_ours(bits, rb, r))
    inexact = np.count_nonzero(bits & 0xFFFF)
    r_other = seeded_rng("pychop-other", r).integers(0, 1 << r, bits.size, dtype=np.int64)
    controls = {
        "flipped u = R / 2**r": rb / float(1 << r),
        "off by one u = (2**r - 1 - R) / 2**r": ((1 << r) - 1 - rb) / float(1 << r),
        "independent random bits": _u_same_bits(r_other, r),
    }
    for name, u in controls.items():
        bad = np.count_nonzero(_bf16_bits(_pychop_sr(x, u)) != ours)
        assert bad > inexact // 20, f"{name}: only {bad} mismatches (seed {SEED}, r={r})"
    rtz = _unsigned_zero(round_fp32(bits, "bf16", "rtz", saturate=True))
    pychop = _bf16_bits(_pychop_sr(x, _u_same_bits(rb, r)))
    bad = np.count_nonzero(rtz != pychop)
    assert bad > inexact // 10, f"RTZ vs pychop SR: only {bad} mismatches (seed {SEED})"


def test_pychop_limits_outside_domain():
    """Why the excluded inputs are excluded (pychop behaviour, module docstring)."""
    r = 16
    # [2**-149, 2**-133): ours rounds up to 2**-133 for R = 2**r - 1; pychop flushes to +0
    tiny = np.array([0x0000C000, 0x00008001, 0x80000001, 0x00007FFF], dtype=np.uint32)
    rb = np.full(tiny.size, (1 << r) - 1, dtype=np.int64)
    ours = _ours(tiny, rb, r)
    assert np.array_equal(ours & 0x7FFF, [1, 1, 1, 1])
    theirs = _pychop_sr(_to_f64(tiny), _u_same_bits(rb, r))
    assert np.array_equal(theirs, np.zeros(tiny.size)) and not np.signbit(theirs).any()
    # +-inf pass through (ours: saturate=False), NaN stays NaN; -0.0 comes back as +0
    special = np.array([0x7F800000, 0xFF800000, 0x7FC00000, 0x80000000], dtype=np.uint32)
    rb = np.zeros(special.size, dtype=np.int64)
    with np.errstate(invalid="ignore"):
        theirs = _pychop_sr(_to_f64(special), _u_same_bits(rb, r))
    ours = _ours(special, rb, r, saturate=False)
    assert np.array_equal(ours, [0x7F80, 0xFF80, 0x7FC0, 0x8000])
    assert theirs[0] == np.inf and theirs[1] == -np.inf and np.isnan(theirs[2])
    assert theirs[3] == 0 and not np.signbit(theirs[3])
