"""Test vectors for the arithmetic units, shared by the golden tests and the cocotb testbenches.

Every generator returns unsigned bit patterns in the format's width (see
:mod:`golden.formats`) and draws all randomness from the ``np.random.Generator`` it is given,
so a seed reproduces the vectors exactly.

* :func:`special_bits` - one of every special-value class of a format.
* :func:`random_bits` - random patterns mixed with clustered, extreme and short-mantissa
  values, so that additions cancel, roundings tie and products overflow and underflow.
* :func:`operand_pairs` - every pair of specials, random pairs, and (fp32 x fp32) pairs whose
  sum or product is exactly halfway between two fp32 numbers.
* :func:`cast_specials`, :func:`cast_boundaries`, :func:`cast_inputs` - fp32 inputs of a
  cast to a narrower format: specials of both formats, every target value and midpoint with
  its fp32 neighbours, and random mixes of them.
* :func:`seed`, :func:`seeded_rng` - the run's seed (``NCLITE_SEED``) and one generator per
  purpose drawn from it: the one way the tests seed their randomness.
"""

from __future__ import annotations

import functools
import os
import zlib

import numpy as np

from golden.formats import FloatFormat, get_format

__all__ = ["seed", "seeded_rng", "operands", "special_bits", "random_bits", "operand_pairs",
           "cast_specials", "cast_boundaries", "cast_inputs", "sparse_mask"]

_U64 = np.uint64


def seed() -> int:
    """The run's random seed: ``NCLITE_SEED``, default 1 (failure messages name it)."""
    return int(os.environ.get("NCLITE_SEED", "1"))


def seeded_rng(*salt, seed: int | None = None) -> np.random.Generator:
    """A generator of its own for each purpose: seeded with the run's seed (or ``seed``) and
    the CRC-32 of each ``salt`` as text (not ``hash()``, which changes per process), so a
    seed reproduces every purpose's vectors and purposes do not share draws."""
    base = globals()["seed"]() if seed is None else seed
    return np.random.default_rng([base, *(zlib.crc32(str(s).encode()) for s in salt)])


def _dedupe(values) -> np.ndarray:
    seen: dict[int, None] = {}
    for v in values:
        seen.setdefault(int(v), None)
    return np.array(list(seen), dtype=np.uint64)


def _pow2_bits(f: FloatFormat, e: int) -> int | None:
    """Bits of +2**e in ``f`` (normal or subnormal), or None if not representable."""
    if f.emin <= e <= f.emax:
        return (e + f.bias) << f.man_bits
    k = e - (f.emin - f.man_bits)  # position in the subnormal mantissa
    if 0 <= k < f.man_bits:
        return 1 << k
    return None


def special_bits(fmt) -> np.ndarray:
    """Every special-value class of ``fmt``, as a deterministic array of unique bit patterns.

    Both signs of: zero, min and max subnormal, a mid subnormal, min normal, max finite and
    the value one ulp below it, infinity (formats that have it), 1.0 and one ulp on either
    side of it, 1.5 and powers of two across the exponent range (both ends, around 1, and for
    fp32 2**+-24 and 2**+-64, which tie or overflow/underflow in sums and products). NaNs:
    the canonical quiet NaN of both signs and, for IEEE-like formats, the smallest signalling
    NaN of both signs and the all-ones NaN; fp32 also has quiet and signalling NaNs with
    payloads (0x7FC00001, 0x7FBFFFFF, 0xFF800001). fp32 further adds 2**-24 and 3 * 2**-24
    (half and 1.5 ulp of 1.0) and 2**103 (half an ulp of max finite) so that pairs of
    specials contain additions that tie.
    """
    f = get_format(fmt)
    mags = [
        0,
        f.min_subnormal_bits,
        f.max_subnormal_bits,
        1 << (f.man_bits - 1),
        f.min_normal_bits,
        f.min_normal_bits + 1,
        f.max_finite_bits,
        f.max_finite_bits - 1,
        f.one_bits,
        f.one_bits + 1,
        f.one_bits - 1,
        f.one_bits | (1 << (f.man_bits - 1)),  # 1.5
    ]
    exps = [f.emin, f.emin + 1, -1, 1, 2, 3, f.emax - 1, f.emax]
    if f.name == "fp32":
        exps += [-149, -148, -127, -64, -63, -25, -24, -23, 23, 24, 63, 64, 103]
        mags += [(127 - 23) << 23 | 1 << 22]  # 3 * 2**-24
    mags += [b for b in (_pow2_bits(f, e) for e in exps) if b is not None]
    if f.inf_bits is not None:
        mags.append(f.inf_bits)
    finite = _dedupe(mags)
    out = list(finite) + [v | f.sign_mask for v in finite]
    nans = [f.canonical_nan_bits, f.canonical_nan_bits | f.sign_mask]
    if f.nan_encoding == "ieee":
        nans += [f.exp_mask | 1, f.exp_mask | 1 | f.sign_mask, (1 << f.bits) - 1,
                 f.sign_mask - 1]
    if f.name == "fp32":
        nans += [0x7FC00001, 0x7FBFFFFF, 0xFF800001]
    return _dedupe(out + nans).astype(f.uint_dtype)


def _exp_field(f: FloatFormat) -> int:
    """Largest exponent field of a finite number."""
    return f.max_finite_bits >> f.man_bits


def _compose(f: FloatFormat, rng: np.random.Generator, e: np.ndarray) -> np.ndarray:
    """Random sign and mantissa around the given exponent fields (uint64)."""
    n = e.shape[0]
    sign = rng.integers(0, 2, n, dtype=_U64) << _U64(f.bits - 1)
    man = rng.integers(0, 1 << f.man_bits, n, dtype=_U64)
    return sign | (e.astype(_U64) << _U64(f.man_bits)) | man


def random_bits(fmt, rng: np.random.Generator, n: int) -> np.ndarray:
    """``n`` random bit patterns of ``fmt`` (unsigned, format width), shuffled.

    The mix: 30 % uniform over all patterns (specials included); 30 % with exponents within
    +-2 of one of 4 random centres shared by the whole call (so sums of two draws cancel
    and align often); 15 % in the top 4 finite binades (overflow), 15 % in the subnormals and
    bottom 3 normal binades (underflow); 10 % short mantissas (1-4 leading bits, the rest 0:
    exact products and many ties in sums). All with random signs.
    """
    f = get_format(fmt)
    n = int(n)
    if n < 0:
        raise ValueError(f"n must be >= 0, not {n}")
    top = _exp_field(f)
    counts = np.array([0.30, 0.30, 0.15, 0.15, 0.10]) * n
    k = np.floor(counts).astype(int)
    k[0] += n - k.sum()
    parts = [rng.integers(0, 1 << f.bits, k[0], dtype=_U64)]
    centres = rng.integers(0, top + 1, 4)
    e = rng.choice(centres, k[1]) + rng.integers(-2, 3, k[1])
    parts.append(_compose(f, rng, np.clip(e, 0, top)))
    parts.append(_compose(f, rng, rng.integers(max(top - 3, 0), top + 1, k[2])))
    parts.append(_compose(f, rng, rng.integers(0, 4, k[3])))
    short = _compose(f, rng, rng.integers(0, top + 1, k[4]))
    keep = rng.integers(1, min(4, f.man_bits) + 1, k[4]).astype(_U64)
    low = (_U64(1) << (_U64(f.man_bits) - keep)) - _U64(1)
    parts.append(short & ~low)
    out = np.concatenate(parts)
    rng.shuffle(out)
    return out.astype(f.uint_dtype)


def _exact_in_fp32(values: np.ndarray) -> np.ndarray:
    """Which float64 values are finite and exactly representable in fp32."""
    with np.errstate(all="ignore"):
        v32 = values.astype(np.float32)
    return np.isfinite(v32) & (v32.astype(np.float64) == values)


def _fp32_tie_pairs(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    """fp32 pairs whose exact sum (first half) or product (second half) is a rounding tie,
    with a few near-ties (one ulp of the addend off) among the sums, and subnormal products
    that are ties but for a 1 far below the round bit."""
    fixed = [
        (0x3F800000, 0x33800000),  # 1 + 2**-24: tie, stays 1 (even)
        (0x3F800000, 0x34400000),  # 1 + 3 * 2**-24: tie, rounds up to 1 + 2**-22
        (0x3F800001, 0x33800000),  # (1 + ulp) + half ulp: tie, rounds up (to even)
        (0xBF800000, 0xB3800000),  # negative tie
        (0x3F800000, 0xB3000000),  # 1 - 2**-25: tie below a binade boundary, stays 1
        (0x3F800000, 0x33800001),  # just above the tie
        (0x3F800000, 0x337FFFFF),  # just below the tie
        (0x7F7FFFFF, 0x73000000),  # max + half ulp: tie to even rounds up: overflow to inf
        (0x7F7FFFFF, 0x72FFFFFF),  # max + just below half ulp: stays max
        (0xFF7FFFFF, 0xF3000000),  # -max - half ulp: -inf
        (0x4B800000, 0x3F800000),  # 2**24 + 1: tie, stays 2**24
        (0x4B800001, 0x3F800000),  # (2**24 + 2) + 1: tie, rounds up to 2**24 + 4
        (0x3F800800, 0x3F800800),  # (1 + 2**-12)**2 = 1 + 2**-11 + 2**-24: product tie
        (0x3FC00001, 0x3FC00001),  # product with sticky bits
        (0x00000003, 0x3F000000),  # 3 * 2**-149 * 0.5: subnormal product tie, to 2 * 2**-149
        (0x00000001, 0x3F000000),  # min subnormal * 0.5: tie to 0
        (0x00000001, 0x3F400000),  # min subnormal * 0.75: rounds up to min subnormal
        (0x00800000, 0x3F7FFFFF),  # min normal * (1 - ulp): rounds to min normal
        # (1 + 2**-23) * 2**-75 * (2 - 2**-23) * 2**-76 = 2**-150 + 2**-174 - 2**-197: half
        # the min subnormal and a 1 far below it (shifted out): rounds up to min subnormal
        (0x1A000001, 0x19FFFFFF),
    ]
    a = [np.array([p[0] for p in fixed], dtype=np.uint64)]
    b = [np.array([p[1] for p in fixed], dtype=np.uint64)]
    n_add = n // 2
    # Sums: x normal with exponent field E, y = +-t * 2**(E-151) (t odd: t/2 ulp of x).
    ex = rng.integers(2, 255, n_add)
    x = (ex.astype(_U64) << _U64(23)) | rng.integers(0, 1 << 23, n_add, dtype=_U64)
    x |= rng.integers(0, 2, n_add, dtype=_U64) << _U64(31)
    t = np.where(rng.random(n_add) < 0.5, 1, 2 * rng.integers(0, 128, n_add) + 1)
    y = np.ldexp(t.astype(np.float64), ex - 151) * rng.choice([-1.0, 1.0], n_add)
    ok = _exact_in_fp32(y)
    yb = y[ok].astype(np.float32).view(np.uint32).astype(_U64)
    near = rng.random(yb.shape[0]) < 0.2  # +-1 in the last place of y: no longer a tie
    yb = np.where(near, yb + rng.choice(np.array([1, -1 + (1 << 64)], dtype=_U64), yb.size), yb)
    a.append(x[ok])
    b.append(yb & _U64(0xFFFFFFFF))
    # Products: odd p, q with p*q odd of 25 bits (normal result) or any odd P < 2**24 scaled
    # to 2**-150 (subnormal result): the bit below the kept LSB is the last one set.
    n_mul = n - n_add
    p = 2 * rng.integers(1 << 10, 1 << 12, n_mul) + 1
    lo = ((1 << 24) + p - 1) // p
    hi = ((1 << 25) - 1) // p
    q = lo + rng.integers(0, 1 << 30, n_mul) % (hi - lo + 1)
    q = np.where(q % 2 == 0, np.where(q + 1 <= hi, q + 1, q - 1), q)
    sub = rng.random(n_mul) < 0.25
    q_sub = 2 * (rng.integers(0, 1 << 30, n_mul) % (((1 << 24) // p - 1) // 2 + 1)) + 1
    q = np.where(sub, q_sub, q)
    z = np.where(sub, -150, rng.integers(-126 - 24, 128 - 24, n_mul))
    # Subnormal near-ties: p * q = T with T = 1 (mod 2**k) and T >> k odd, scaled to
    # 2**(-150 - k): a tie at the min subnormal's scale but for a 1 k bits below the round
    # bit, which only a right shift's sticky bit sees (the result rounds up, not to even).
    # k = 24 puts that 1 just below the bits the shift keeps.
    n_near = max(16, n_mul // 8)
    k = np.where(rng.random(n_near) < 0.25, 24, rng.integers(2, 24, n_near))
    p_near = 2 * rng.integers(1 << 9, 1 << 11, n_near) + 1
    q_near, keep = [], []
    for pi, ki in zip(p_near.tolist(), k.tolist(), strict=True):
        inv = pow(pi, -1, 1 << ki)  # p * inv = 1 (mod 2**k)
        # q = inv + j * 2**k: below 2**24 (an fp32 significand) and T >> k below 2**24 (the
        # product subnormal)
        top = max(0, (min((1 << 24) - 1, ((1 << (24 + ki)) - 1) // pi) - inv) >> ki)
        j = int(rng.integers(0, top + 1))
        if ((pi * inv >> ki) + pi * j) % 2 == 0:  # T >> k odd (p is odd: j's parity flips it)
            j = j + 1 if j + 1 <= top else j - 1
        keep.append(j >= 0 and ((pi * (inv + (j << ki))) >> ki) % 2 == 1)
        q_near.append(inv + (max(j, 0) << ki))
    keep = np.array(keep)
    p = np.concatenate([p, p_near[keep]])
    q = np.concatenate([q, np.array(q_near, dtype=np.int64)[keep]])
    z = np.concatenate([z, (-150 - k)[keep]])
    n_mul = p.size
    # Exponents of x = p * 2**ea and y = q * 2**(z - ea), both representable in fp32.
    lo_e = np.maximum(-149, z - 110)
    hi_e = np.minimum(110, z + 149)
    ea = lo_e + rng.integers(0, 1 << 30, n_mul) % (hi_e - lo_e + 1)
    pa = np.ldexp(p.astype(np.float64), ea) * rng.choice([-1.0, 1.0], n_mul)
    qb = np.ldexp(q.astype(np.float64), z - ea) * rng.choice([-1.0, 1.0], n_mul)
    ok = _exact_in_fp32(pa) & _exact_in_fp32(qb)
    a.append(pa[ok].astype(np.float32).view(np.uint32).astype(_U64))
    b.append(qb[ok].astype(np.float32).view(np.uint32).astype(_U64))
    return (np.concatenate(a).astype(np.uint32), np.concatenate(b).astype(np.uint32))


def operand_pairs(fmt_a, fmt_b, rng: np.random.Generator, n: int
                  ) -> tuple[np.ndarray, np.ndarray]:
    """Operand pairs ``(a, b)`` (bit patterns of ``fmt_a`` and ``fmt_b``) for a binary op.

    In order: every pair of :func:`special_bits` (``a`` major), then ``n`` random pairs,
    then, when both formats are fp32, ``max(64, n // 8)`` tie-producing pairs plus a fixed
    list of hand-picked ties (``1 + 2**-24``, ``1 + 3 * 2**-24``, ``max + 2**103`` -> inf,
    ``(1 + 2**-12)**2``, subnormal product ties, ...).

    Random pairs of one format are half two draws of one :func:`random_bits` call (so they
    share exponent clusters), a quarter with ``b``'s exponent within ``man_bits + 3`` binades
    of ``a``'s (alignment shifts of every size) and a quarter ``b ~ -a`` with low mantissa
    bits changed (massive cancellation). Pairs of different formats are independent
    :func:`random_bits` draws. Random fp32 ties are ``x + y`` with ``y`` an odd multiple of
    half an ulp of ``x`` (1 in 5 nudged one ulp of ``y`` off the tie) and products ``x * y``
    whose exact value has the bit just below the kept LSB as its last set bit, in the normal
    and the subnormal range.
    """
    fa = get_format(fmt_a, "fmt_a")
    fb = get_format(fmt_b, "fmt_b")
    n = int(n)
    if n < 0:
        raise ValueError(f"n must be >= 0, not {n}")
    sa, sb = special_bits(fa), special_bits(fb)
    a = [np.repeat(sa, sb.size).astype(_U64)]
    b = [np.tile(sb, sa.size).astype(_U64)]
    if fa == fb:
        f = fa
        n_mix = n - 2 * (n // 4)
        r = random_bits(f, rng, 2 * n_mix).astype(_U64)
        a.append(r[:n_mix])
        b.append(r[n_mix:])
        # Near exponents.
        m = n // 4
        x = random_bits(f, rng, m).astype(_U64)
        ex = ((x >> _U64(f.man_bits)) & _U64((1 << f.exp_bits) - 1)).astype(np.int64)
        span = f.man_bits + 3
        d = np.where(rng.random(m) < 0.5, rng.integers(-2, 3, m), rng.integers(-span, span + 1, m))
        a.append(x)
        b.append(_compose(f, rng, np.clip(ex + d, 0, _exp_field(f))))
        # Cancellation: b = -a with some low mantissa bits changed.
        x = random_bits(f, rng, m).astype(_U64)
        k = rng.integers(0, f.man_bits + 1, m).astype(_U64)
        flip = rng.integers(0, 1 << f.man_bits, m, dtype=_U64) & ((_U64(1) << k) - _U64(1))
        a.append(x)
        b.append(x ^ _U64(f.sign_mask) ^ flip)
    else:
        a.append(random_bits(fa, rng, n).astype(_U64))
        b.append(random_bits(fb, rng, n).astype(_U64))
    if fa.name == "fp32" and fb.name == "fp32":
        ta, tb = _fp32_tie_pairs(rng, max(64, n // 8))
        a.append(ta.astype(_U64))
        b.append(tb.astype(_U64))
    return np.concatenate(a).astype(fa.uint_dtype), np.concatenate(b).astype(fb.uint_dtype)


def sparse_mask(rng: np.random.Generator, p, k: int, cols: int) -> np.ndarray:
    """A random K x ``cols`` mask of the n:m pattern ``p`` (``golden.sparse.Pattern``): each
    group of each column keeps exactly ``min(n, rows)`` positions, drawn group by group."""
    mask = np.zeros((k, cols), bool)
    for g0, rows, slots in p.groups(k):
        for c in range(cols):
            mask[g0 + rng.choice(rows, slots, replace=False), c] = True
    return mask


def operands(fmt, rng: np.random.Generator, shape, specials: float) -> np.ndarray:
    """Random operands of ``fmt`` (int64 bit patterns of ``shape``): :func:`random_bits`, with
    a fraction ``specials`` replaced by :func:`special_bits` values (NaN, inf, 0, ...)."""
    n = int(np.prod(shape))
    values = random_bits(fmt, rng, n).astype(np.int64)
    pick = rng.random(n) < specials
    values[pick] = rng.choice(special_bits(fmt).astype(np.int64), int(pick.sum()))
    return values.reshape(shape)


def cast_specials(fmt) -> np.ndarray:
    """fp32 specials plus the target's specials widened to fp32 (unique, uint32)."""
    from golden.formats import to_fp32_bits

    return np.unique(np.concatenate([special_bits("fp32"),
                                     to_fp32_bits(special_bits(fmt), fmt)])).astype(np.uint32)


def cast_boundaries(fmt) -> np.ndarray:
    """fp32 patterns at and around every value and midpoint of the target ``fmt``.

    Every finite target pattern widened to fp32, the exact midpoints between consecutive
    target magnitudes (ties for RNE) and the RNE overflow threshold (max + half an ulp), each
    with its fp32 neighbours +-1 ulp, with both signs. Unique and sorted, uint32; for 16-bit
    targets about 4 * 10^5 patterns. Computed once per format; the array is read-only.
    """
    return _cast_boundaries(get_format(fmt).name)


@functools.cache
def _cast_boundaries(name: str) -> np.ndarray:
    from golden.formats import to_fp32_bits

    f = get_format(name)
    t = np.arange(1 << f.bits, dtype=np.uint64).astype(f.uint_dtype)
    w = to_fp32_bits(t, f).astype(np.int64)
    w = w[(w & 0x7F800000) != 0x7F800000]
    v = np.sort(np.unique(w & 0x7FFFFFFF))
    vals = v.astype(np.uint32).view(np.float32).astype(np.float64)
    mids = ((vals[:-1] + vals[1:]) / 2).astype(np.float32).view(np.uint32).astype(np.int64)
    top = vals[-1] + (vals[-1] - vals[-2]) / 2  # max + half ulp: the RNE overflow threshold
    extra = np.array([top], dtype=np.float64).astype(np.float32).view(np.uint32)
    base = np.concatenate([v, mids, extra.astype(np.int64)])
    allv = np.concatenate([base - 1, base, base + 1])
    allv = allv[(allv >= 0) & (allv < 0x7F800000)]
    allv = np.concatenate([allv, allv | 0x80000000])
    out = np.unique(allv).astype(np.uint32)
    out.flags.writeable = False
    return out


def cast_inputs(fmt, rng: np.random.Generator, n: int) -> np.ndarray:
    """``n`` random fp32 inputs for a cast to ``fmt`` (uint32, shuffled): a quarter uniform
    over all patterns, a quarter :func:`random_bits` mixes, half drawn from
    :func:`cast_boundaries` (ties, exact values, overflow and subnormal thresholds)."""
    n = int(n)
    if n < 0:
        raise ValueError(f"n must be >= 0, not {n}")
    k = n // 4
    bounds = cast_boundaries(fmt)
    out = np.concatenate([
        rng.integers(0, 1 << 32, k, dtype=_U64).astype(np.uint32),
        random_bits("fp32", rng, k).astype(np.uint32),
        rng.choice(bounds, n - 2 * k),
    ])
    rng.shuffle(out)
    return out
