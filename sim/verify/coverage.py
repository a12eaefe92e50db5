"""Functional coverage: cover points with named bins, crosses, per-run files, merging, holes.

The bins are counted by cocotb-coverage (:class:`cocotb_coverage.coverage.CoverPoint` and
``CoverCross``), each process's counts are written with its ``coverage_db.export_to_yaml`` and
the files of many simulator processes (pytest-xdist workers, both simulators, the runs of
:mod:`sim.verify.coverage_report`) are added up with its ``merge_coverage``. This module keeps what
cocotb-coverage does not do (see :class:`CoverGroup`): keyword sampling of some points of a
group, a count per sample, and the values that are no bin (``unknown``) or an excluded cross
combination (``illegal``), which cocotb-coverage drops without a word.

* A :class:`CoverGroup` has :class:`CoverPoint` s (a name and the tuple of its bin names) and
  :class:`Cross` es (a tuple of point names; every combination of their bins is a bin, except
  the combinations its ``exclude`` predicate declares impossible).
* :meth:`CoverGroup.sample` takes one value per point: a bin name, or a set of bin names
  (e.g. every special-value class present in a tile: each counts, and a cross counts each
  combination). A value that is no bin of its point is counted under ``unknown``; a hit on an
  excluded cross combination under ``illegal``: both are classification bugs, listed by the
  report.
* Coverage is on when ``NCLITE_FUNC_COVERAGE_DIR`` names a directory (in the simulator's
  environment: :mod:`sim.runner` passes its own on). Each process then writes
  ``<pid>-<random>.yml`` (cocotb-coverage's export) and ``<pid>-<random>.json`` (the unknown
  and illegal values, and which run it was) there when it exits; :mod:`sim.verify.coverage_report`
  merges them.

The groups of the design (:data:`GROUPS`) are defined here, with the samplers the testbenches
call (each returns at once when coverage is off):

* ``tensor_engine`` (:func:`te_stationary`, :func:`te_moving`, :func:`te_phase`,
  :func:`te_psum`): stationary and moving dtype x PSUM mode (overwrite / accumulate) x
  special-value class of the operands (and of each pair multiplied) x shape class of K, M, F;
  the class of every PSUM word drained from the RTL.
* ``sru`` (:func:`sru_beats`): target dtype x rounding mode x saturation x input class (±0,
  subnormal in the target, normal, tie, max finite, overflow, ±inf, NaN) and x the rounding
  outcome the RTL produced (exact, rounded down / up, overflow to max / inf / NaN).
* ``sequencer`` (:func:`core_program`): each opcode (illegal ones too) after each previous
  opcode, pushed back to back or after an idle core, and every error code reached, by the
  failing opcode.

Classes come from the golden model's formats (:mod:`golden.formats`).
"""

from __future__ import annotations

import ast
import atexit
import itertools
import json
import os
import tempfile
import uuid
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import yaml
from cocotb_coverage import coverage as cc

__all__ = ["ENV_DIR", "CoverPoint", "Cross", "CoverGroup", "GROUPS", "enabled", "set_enabled",
           "new_groups", "dump", "merge_files", "merge_dir", "summary", "value_classes",
           "sru_input_classes", "te_stationary", "te_moving", "te_phase", "te_psum",
           "sru_beats", "core_program"]

#: The environment variable naming the directory each process writes its coverage files to.
ENV_DIR = "NCLITE_FUNC_COVERAGE_DIR"

_on = bool(os.environ.get(ENV_DIR))


def enabled() -> bool:
    """Whether this process collects functional coverage.

    Returns
    -------
    bool
        True when :data:`ENV_DIR` was set at import, or after ``set_enabled(True)``.
    """
    return _on


def set_enabled(on: bool) -> None:
    """Turn sampling on or off in this process (tests; simulators use :data:`ENV_DIR`).

    Parameters
    ----------
    on : bool
        Whether the samplers count.
    """
    global _on
    _on = bool(on)


# --- the collector: cocotb-coverage's points and crosses ------------------------------------


@dataclass(frozen=True)
class CoverPoint:
    """A named point and its bins (names, in report order)."""

    name: str
    bins: tuple[str, ...]


@dataclass(frozen=True)
class Cross:
    """Every combination of the bins of ``points``, except those ``exclude(values)`` (a dict
    point name -> bin) declares impossible."""

    name: str
    points: tuple[str, ...]
    exclude: Callable[[dict], bool] | None = None


def _key(values: Iterable[str]) -> str:
    return "|".join(values)


def _point(name: str, bins: Iterable[str]) -> Callable[[frozenset], None]:
    """A cocotb-coverage point ``name`` that counts each bin in the set it is called with."""

    @cc.CoverPoint(name, xf=lambda values: values, rel=lambda values, b: b in values,
                   bins=list(bins), inj=False)
    def sample(values: frozenset) -> None:
        pass

    return sample


def _cross(name: str, items: list[str], ignore: list[tuple]) -> Callable[[], None]:
    """A cocotb-coverage cross of the points ``items`` (their hits of their last call)."""

    @cc.CoverCross(name, items=items, ign_bins=ignore)
    def sample() -> None:
        pass

    return sample


def _add_hits(item, n: int) -> None:
    """Count the bins ``item`` hit at its last call ``n`` times, not once: cocotb-coverage
    counts one hit per call, and its ``detailed_coverage`` is the live bin -> hits dict (with
    ``at_least=1`` the covered bins, and so its coverage, stay the same)."""
    if n != 1:
        hits = item.detailed_coverage
        for b in item.new_hits:
            hits[b] += n - 1


_instances = itertools.count()


class CoverGroup:
    """Points and crosses, counted by cocotb-coverage.

    Each group's items live in cocotb-coverage's ``coverage_db`` under a root of their own
    (``nclite<i>.<group>.<point>``), so that a fresh group (:func:`new_groups`) starts empty.
    What is kept here around cocotb-coverage, which samples only whole decorated calls:

    * :meth:`sample` takes keyword values for some points, and counts only the crosses all of
      whose points it has. A cocotb-coverage cross combines the bins its points hit at their
      last call, so each cross has its own copies of its points (``nclite<i>.~<group>.<cross>.
      <point>``), sampled with it: a sample can count crosses without the points
      (``points=False``) and never mixes a value of an earlier sample into a cross;
    * ``count``: one sample that counts ``count`` times (the SRU's beats, by class);
    * ``unknown`` and ``illegal``: values that are no bin of their point, and combinations a
      cross excludes, which cocotb-coverage ignores.

    Parameters
    ----------
    name : str
        The group's name (``tensor_engine``).
    points : iterable of CoverPoint
        Its points.
    crosses : iterable of Cross, optional
        Its crosses, of its points.
    """

    def __init__(self, name: str, points: Iterable[CoverPoint], crosses: Iterable[Cross] = ()):
        self.name = name
        self.points = {p.name: p for p in points}
        self.crosses = {c.name: c for c in crosses}
        for c in self.crosses.values():
            missing = [p for p in c.points if p not in self.points]
            if missing:
                raise ValueError(f"cross {c.name} names unknown points {missing}")
        self.root = f"nclite{next(_instances)}"
        base = f"{self.root}.{name}"
        self._sets = {p: frozenset(pt.bins) for p, pt in self.points.items()}
        self._points = {p: (_point(f"{base}.{p}", pt.bins), f"{base}.{p}")
                        for p, pt in self.points.items()}
        self._crosses = {}
        for c in self.crosses.values():
            items = [f"{self.root}.~{name}.{c.name}.{p}" for p in c.points]
            samplers = [_point(item, self.points[p].bins) for item, p in zip(items, c.points,
                                                                             strict=True)]
            ignore = [combo for combo in itertools.product(*(self.points[p].bins
                                                             for p in c.points))
                      if c.exclude is not None and c.exclude(dict(zip(c.points, combo,
                                                                      strict=True)))]
            self._crosses[c.name] = (_cross(f"{base}.{c.name}", items, ignore), samplers,
                                     items, f"{base}.{c.name}")
        self.unknown: Counter = Counter()
        self.illegal: Counter = Counter()

    def cross_bins(self, name: str) -> list[str]:
        """The bins of a cross, impossible ones left out.

        Parameters
        ----------
        name : str
            The cross.

        Returns
        -------
        list of str
            ``a|b|c`` keys, in the order of the product of its points' bins.
        """
        return [_key(b) for b in cc.coverage_db[self._crosses[name][3]].detailed_coverage]

    def sample(self, count: int = 1, *, crosses: Iterable[str] | None = None,
               points: bool = True, **values) -> None:
        """Count one observation: ``point=bin`` or ``point={bins}`` for some or all points.

        Parameters
        ----------
        count : int, optional
            How many observations this one stands for.
        crosses : iterable of str, optional
            Count only these crosses (default: every cross all of whose points have values).
        points : bool, optional
            Whether to count the points themselves (else only the crosses).
        **values : str or set of str
            A bin, or a set of bins, per point.

        Raises
        ------
        KeyError
            If a keyword is no point of the group.
        """
        only = None if crosses is None else set(crosses)
        sets: dict[str, frozenset] = {}
        for point, value in values.items():
            if point not in self.points:
                raise KeyError(f"{self.name} has no point {point!r}")
            vals = {value} if isinstance(value, str) else set(value)
            for v in sorted(vals - self._sets[point]):
                self.unknown[f"{point}={v}"] += count
            sets[point] = frozenset(vals & self._sets[point])
            if points:
                sampler, item = self._points[point]
                sampler(sets[point])
                _add_hits(cc.coverage_db[item], count)
        for name, c in self.crosses.items():
            if (only is not None and name not in only) or not all(p in sets for p in c.points):
                continue
            cross, samplers, items, item = self._crosses[name]
            for sampler, p in zip(samplers, c.points, strict=True):
                sampler(sets[p])
            cross()
            _add_hits(cc.coverage_db[item], count)
            counted = set(cc.coverage_db[item].new_hits)
            for combo in itertools.product(*(sorted(sets[p]) for p in c.points)):
                if combo not in counted:
                    self.illegal[f"{name}:{_key(combo)}"] += count

    def counts(self) -> dict[str, dict[str, int]]:
        """Every bin's hits, from cocotb-coverage.

        Returns
        -------
        dict of str to dict of str to int
            Per point and cross, bin (``a|b`` for a cross) -> hits, every bin listed.
        """
        out = {p: dict(cc.coverage_db[item].detailed_coverage)
               for p, (_, item) in self._points.items()}
        for x, (*_, item) in self._crosses.items():
            out[x] = {_key(b): n for b, n in cc.coverage_db[item].detailed_coverage.items()}
        return out

    def empty(self) -> bool:
        """Whether nothing was counted.

        Returns
        -------
        bool
            True when no point has a hit and no value was unknown or illegal.
        """
        counts = self.counts()
        return not (any(any(counts[p].values()) for p in self.points) or self.unknown
                    or self.illegal)

    def to_dict(self) -> dict:
        """The counts, hit bins only.

        Returns
        -------
        dict
            ``points`` and ``crosses`` (name -> bin -> hits), ``unknown`` and ``illegal``.
        """
        counts = self.counts()
        hit = {name: {b: n for b, n in c.items() if n} for name, c in counts.items()}
        return {"points": {p: hit[p] for p in self.points if hit[p]},
                "crosses": {x: hit[x] for x in self.crosses if hit[x]},
                "unknown": dict(self.unknown), "illegal": dict(self.illegal)}

    def _export(self) -> dict:
        """This group's items in cocotb-coverage's ``coverage_db``, without the root prefix
        and the crosses' own copies of the points."""
        prefix = f"{self.root}."
        return {k[len(prefix):]: v for k, v in cc.coverage_db.items()
                if k.startswith(prefix + self.name)}

    def _hits(self, name: str) -> dict:
        """The live bin -> hits dict of a point or cross in ``coverage_db`` ({} if none)."""
        if name in self.points:
            return cc.coverage_db[self._points[name][1]].detailed_coverage
        if name in self.crosses:
            return cc.coverage_db[self._crosses[name][3]].detailed_coverage
        return {}

    def merge(self, data: dict) -> None:
        """Add counts: the bins of a (merged) cocotb-coverage export, and the ``unknown`` and
        ``illegal`` counts of :func:`dump`'s JSON.

        Everything is judged again against this group's definitions: a bin it does not define
        counts as unknown (of a point) or illegal (of a cross), and an unknown or illegal value
        that is a bin here counts in it.

        Parameters
        ----------
        data : dict
            ``{"items": {name: {bin: hits}}, "unknown": {key: n}, "illegal": {key: n}}``: the
            items named without the group (``s_fmt``), a cross's bins as cocotb-coverage's
            export writes them (``"('bf16', 'overwrite')"``); the keys as :meth:`report`'s.
        """
        for name, bins in data.get("items", {}).items():
            hits = self._hits(name)
            for b, n in bins.items():
                if name in self.points:
                    key = b
                    self.unknown[f"{name}={b}"] += 0 if b in hits else n
                else:
                    key = tuple(ast.literal_eval(b) if b.startswith("(") else b.split("|"))
                    self.illegal[f"{name}:{_key(key)}"] += 0 if key in hits else n
                if key in hits:
                    hits[key] += n
        for what, sep in (("unknown", "="), ("illegal", ":")):
            for key, n in data.get(what, {}).items():
                name, _, b = key.partition(sep)
                hits = self._hits(name)
                b = b if sep == "=" else tuple(b.split("|"))
                if b in hits:
                    hits[b] += n
                else:
                    getattr(self, what)[key] += n
        self.unknown, self.illegal = +self.unknown, +self.illegal  # drop the zero counts

    def report(self) -> dict:
        """Per point and cross: bins hit, total, the holes; the group's totals.

        Returns
        -------
        dict
            ``hit``, ``total``, ``percent``, ``items`` (name -> kind, hit, total, holes),
            ``unknown`` and ``illegal``.
        """
        counts = self.counts()
        out, hit_all, total_all = {}, 0, 0
        for name in [*self.points, *self.crosses]:
            bins = list(self.points[name].bins) if name in self.points \
                else self.cross_bins(name)
            holes = [b for b in bins if not counts[name].get(b)]
            total = len(bins)
            out[name] = {"kind": "point" if name in self.points else "cross",
                         "hit": total - len(holes), "total": total, "holes": holes}
            hit_all += total - len(holes)
            total_all += total
        return {"hit": hit_all, "total": total_all,
                "percent": round(100.0 * hit_all / total_all, 1) if total_all else 0.0,
                "items": out, "unknown": dict(self.unknown), "illegal": dict(self.illegal)}


# --- classes of values (golden formats) -----------------------------------------------------

#: Special-value classes of a bit pattern in its own format.
VALUE_CLASSES = ("+0", "-0", "subnormal", "normal", "max_finite", "+inf", "-inf", "nan")
#: Classes of an fp32 input relative to a cast target.
SRU_INPUT_CLASSES = ("+0", "-0", "subnormal", "normal", "tie", "max_finite", "overflow",
                     "+inf", "-inf", "nan")
#: What a cast did to a value (the RTL's output against the input).
SRU_OUTCOMES = ("exact", "down", "up", "overflow_max", "overflow_inf", "overflow_nan",
                "special")
SRU_DTYPES = ("bf16", "fp16", "fp8_e4m3", "fp8_e5m2", "fp32")
SRU_MODES = ("rne", "rtz", "sr")
TE_FORMATS = ("bf16", "fp8_e4m3", "fp8_e5m2")
FP32_CLASSES = ("+0", "-0", "subnormal", "normal", "+inf", "-inf", "nan")
_OPS = ("DMA_LOAD", "DMA_STORE", "LOAD_STATIONARY", "MATMUL", "ACTIVATE", "COLLECTIVE",
        "BARRIER", "SET_SEED", "TENSOR_TENSOR", "TENSOR_SCALAR", "TENSOR_REDUCE", "TRANSPOSE",
        "ILLEGAL")
_ERRORS = ("OK", "BAD_OPCODE", "BAD_FIELD", "BAD_DTYPE", "BAD_RANGE", "BAD_SHAPE",
           "BAD_ALIGN")
#: The errors each opcode can fail with on a core outside a ring (golden.iss checks).
FAILURES = {
    "ILLEGAL": ("BAD_OPCODE",),
    "DMA_LOAD": ("BAD_DTYPE", "BAD_RANGE", "BAD_SHAPE", "BAD_ALIGN"),
    "DMA_STORE": ("BAD_DTYPE", "BAD_RANGE", "BAD_SHAPE", "BAD_ALIGN"),
    # BAD_FIELD: a reserved sparsity, or a sparse one on a core without the sparse mode.
    "LOAD_STATIONARY": ("BAD_FIELD", "BAD_DTYPE", "BAD_RANGE", "BAD_SHAPE"),
    "MATMUL": ("BAD_DTYPE", "BAD_RANGE", "BAD_SHAPE"),
    "ACTIVATE": ("BAD_FIELD", "BAD_DTYPE", "BAD_RANGE", "BAD_SHAPE"),
    # Its ranges and shape are checked before whether the core is in a ring.
    "COLLECTIVE": ("BAD_FIELD", "BAD_RANGE", "BAD_SHAPE"),
    "TENSOR_TENSOR": ("BAD_FIELD", "BAD_DTYPE", "BAD_RANGE", "BAD_SHAPE"),
    "TENSOR_SCALAR": ("BAD_FIELD", "BAD_DTYPE", "BAD_RANGE", "BAD_SHAPE"),
    "TENSOR_REDUCE": ("BAD_FIELD", "BAD_DTYPE", "BAD_RANGE", "BAD_SHAPE"),
    "TRANSPOSE": ("BAD_RANGE", "BAD_SHAPE"),
}


def value_classes(bits, fmt) -> np.ndarray:
    """The :data:`VALUE_CLASSES` index of each bit pattern of format ``fmt``."""
    from golden.formats import get_format

    f = get_format(fmt)
    b = np.asarray(bits).astype(np.int64) & ((1 << f.bits) - 1)
    neg = (b & f.sign_mask) != 0
    mag = b & (f.sign_mask - 1)
    exp = (mag & f.exp_mask) >> f.man_bits
    out = np.full(b.shape, 3, dtype=np.int64)  # normal
    out[(exp == 0) & (mag != 0)] = 2
    out[mag == f.max_finite_bits] = 4
    out[(mag == 0) & ~neg] = 0
    out[(mag == 0) & neg] = 1
    if f.has_inf:
        out[(mag == f.inf_bits) & ~neg] = 5
        out[(mag == f.inf_bits) & neg] = 6
        out[(exp == (f.exp_mask >> f.man_bits)) & (mag & f.man_mask != 0)] = 7
    else:  # fn: only the all-ones magnitude is NaN
        out[mag == (f.sign_mask - 1)] = 7
    return out


def _magnitude(x: np.ndarray) -> np.ndarray:
    """|x| of fp32 patterns as float64 (NaNs, signalling ones included, stay NaN quietly)."""
    with np.errstate(invalid="ignore"):
        return np.abs(x.astype(np.uint32).view(np.float32).astype(np.float64))


def _fp32_fields(x: np.ndarray):
    x = x.astype(np.int64)
    return x >> 31, (x >> 23) & 0xFF, x & 0x7FFFFF


def sru_input_classes(x_bits, fmt) -> np.ndarray:
    """The :data:`SRU_INPUT_CLASSES` index of each fp32 pattern as an input of a cast to
    ``fmt`` (for ``"fp32"``, the passthrough: subnormal and max finite are fp32's own)."""
    from golden.formats import FP32, get_format

    f = get_format(fmt)
    x = np.asarray(x_bits).astype(np.int64)
    sign, e32, man = _fp32_fields(x)
    mag = x & 0x7FFFFFFF
    out = np.full(x.shape, 3, dtype=np.int64)
    if f.name == "fp32":
        out[(e32 == 0) & (man != 0)] = 2
        out[mag == FP32.max_finite_bits] = 5
    else:
        val = _magnitude(x)
        p, emin = f.man_bits, f.emin
        e = np.maximum(e32, 1) - 127
        sig = np.where(e32 > 0, man | (1 << 23), man)
        d = np.minimum(23 - p + np.maximum(0, emin - e), 40)
        low = sig & ((np.int64(1) << d) - 1)
        finite = e32 != 0xFF
        out[finite & (val < f.min_normal) & (mag != 0)] = 2
        out[finite & (low == (np.int64(1) << (d - 1))) & (val <= f.max_finite)] = 4
        out[finite & (val == f.max_finite)] = 5
        out[finite & (val > f.max_finite)] = 6
    out[(mag == 0) & (sign == 0)] = 0
    out[(mag == 0) & (sign == 1)] = 1
    out[(mag == 0x7F800000) & (sign == 0)] = 7
    out[(mag == 0x7F800000) & (sign == 1)] = 8
    out[(e32 == 0xFF) & (man != 0)] = 9
    return out


def _sru_outcomes(x: np.ndarray, out: np.ndarray, fmt: str) -> np.ndarray:
    """The :data:`SRU_OUTCOMES` index of each cast ``x`` (fp32) -> ``out`` (the RTL's)."""
    from golden.formats import get_format, to_fp32_bits
    from golden.rounding import round_fp32

    f = get_format(fmt)
    x = x.astype(np.int64)
    _, e32, man = _fp32_fields(x)
    special = e32 == 0xFF
    o = out.astype(np.int64) & ((1 << f.bits) - 1)
    omag = o & (f.sign_mask - 1)
    res = np.zeros(x.shape, dtype=np.int64)  # exact
    if f.name == "fp32":
        res[special] = 6
        return res
    trunc = round_fp32(x.astype(np.uint32), f, "rtz", saturate=True)
    exact = to_fp32_bits(trunc, f).astype(np.int64) == x
    tmag = trunc.astype(np.int64) & (f.sign_mask - 1)
    val = _magnitude(x)
    res[~exact & (omag == tmag)] = 1
    res[~exact & (omag == tmag + 1)] = 2
    over = ~special & (val > f.max_finite)
    res[over & (omag == f.max_finite_bits)] = 3
    if f.has_inf:
        res[over & (omag == f.inf_bits)] = 4
    res[over & (value_classes(o, f) == 7)] = 5
    res[special] = 6
    return res


# --- the groups of the design ---------------------------------------------------------------


def _sru_in_exclude(v: dict) -> bool:
    return v["dtype"] == "fp32" and v["in_class"] in ("tie", "overflow")


def _sru_outcome_exclude(v: dict) -> bool:
    d, mode, sat, oc = v["dtype"], v["mode"], v["saturate"] == "on", v["outcome"]
    if d == "fp32":
        return oc not in ("exact", "special")
    if oc == "up" and mode == "rtz":
        return True
    if oc == "overflow_inf":
        return d == "fp8_e4m3" or sat or mode == "rtz"
    if oc == "overflow_nan":
        return d != "fp8_e4m3" or sat or mode == "rtz"
    return False


def _no_inf(fmt_point: str, class_point: str):
    def exclude(v: dict) -> bool:
        return v[fmt_point] == "fp8_e4m3" and v[class_point] in ("+inf", "-inf")
    return exclude


def _te_pair_exclude(v: dict) -> bool:
    return _no_inf("s_fmt", "s_class")(v) or _no_inf("m_fmt", "m_class")(v)


def _seq_fail_exclude(v: dict) -> bool:
    return v["error"] not in FAILURES.get(v["fail_op"], ())


_PAIRS = "products s_class x m_class"
_PRODUCTS = "products s_fmt x s_class x m_fmt x m_class"


def new_groups() -> dict[str, CoverGroup]:
    """Fresh (empty) coverage groups of the design, by name."""
    te = CoverGroup("tensor_engine", [
        CoverPoint("s_fmt", TE_FORMATS), CoverPoint("m_fmt", TE_FORMATS),
        CoverPoint("mode", ("overwrite", "accumulate")),
        CoverPoint("s_class", VALUE_CLASSES), CoverPoint("m_class", VALUE_CLASSES),
        CoverPoint("k", ("1", "between", "N")), CoverPoint("m", ("1", "between", "N")),
        CoverPoint("f", ("1", "2..N", "N+1..bank-1", "bank")),
        # No -0: a dot product starts at +0.0 and +0 + -0 = +0, so PSUM never holds -0.
        CoverPoint("psum_class", tuple(c for c in FP32_CLASSES if c != "-0")),
    ], [
        Cross("s_fmt x m_fmt x mode", ("s_fmt", "m_fmt", "mode")),
        Cross("s_fmt x s_class", ("s_fmt", "s_class"), _no_inf("s_fmt", "s_class")),
        Cross("m_fmt x m_class x mode", ("m_fmt", "m_class", "mode"),
              _no_inf("m_fmt", "m_class")),
        Cross(_PAIRS, ("s_class", "m_class")),
        Cross(_PRODUCTS, ("s_fmt", "s_class", "m_fmt", "m_class"), _te_pair_exclude),
        Cross("k x m x f", ("k", "m", "f")),
        Cross("mode x f", ("mode", "f")),
    ])
    sru = CoverGroup("sru", [
        CoverPoint("dtype", SRU_DTYPES), CoverPoint("mode", SRU_MODES),
        CoverPoint("saturate", ("off", "on")), CoverPoint("in_class", SRU_INPUT_CLASSES),
        CoverPoint("outcome", SRU_OUTCOMES), CoverPoint("out_class", VALUE_CLASSES),
        CoverPoint("invalid", ("reserved_dtype", "unbuilt_dtype", "reserved_mode")),
    ], [
        Cross("dtype x mode x saturate x in_class", ("dtype", "mode", "saturate", "in_class"),
              _sru_in_exclude),
        Cross("dtype x mode x saturate x outcome", ("dtype", "mode", "saturate", "outcome"),
              _sru_outcome_exclude),
        Cross("dtype x out_class", ("dtype", "out_class"), _no_inf("dtype", "out_class")),
    ])
    seq = CoverGroup("sequencer", [
        CoverPoint("op", _OPS),
        # A failing command stops the queue: nothing follows it back to back (and a
        # COLLECTIVE always fails on a core outside a ring).
        CoverPoint("prev", ("idle",) + tuple(o for o in _OPS if o not in ("ILLEGAL",
                                                                           "COLLECTIVE"))),
        CoverPoint("gap", ("back_to_back", "after_idle")),
        CoverPoint("error", _ERRORS), CoverPoint("fail_op", tuple(FAILURES)),
        CoverPoint("program", ("completed", "failed", "dropped_while_stopped")),
    ], [
        Cross("prev x op", ("prev", "op")),
        Cross("op x gap", ("op", "gap")),
        Cross("fail_op x error", ("fail_op", "error"), _seq_fail_exclude),
    ])
    return {g.name: g for g in (te, sru, seq)}


#: This process's groups (what the samplers count into).
GROUPS: dict[str, CoverGroup] = new_groups()


def dump(directory: str | os.PathLike | None = None) -> Path | None:
    """Write this process's counts to fresh files in a directory.

    ``<pid>-<random>.yml`` is cocotb-coverage's YAML export of :data:`GROUPS` (``coverage_db``
    holds every group made in this process, fresh ones of tests too, each under a root of its
    own: only these groups are written, named without the root); ``<pid>-<random>.json``
    beside it holds the unknown and illegal values and which run it was.

    Parameters
    ----------
    directory : str or os.PathLike, optional
        Where to write (default: the :data:`ENV_DIR` directory).

    Returns
    -------
    Path or None
        The YAML file; None, and no file, if no group was sampled or there is no directory.
    """
    _sru_flush()
    directory = directory or os.environ.get(ENV_DIR)
    if not directory or all(g.empty() for g in GROUPS.values()):
        return None
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{os.getpid()}-{uuid.uuid4().hex[:8]}.yml"
    meta = {"simulator": os.environ.get("NCLITE_SIMULATOR"),
            "params": os.environ.get("NCLITE_PARAMS"),
            "module": os.environ.get("COCOTB_TEST_MODULES")}
    extra = {"meta": meta, "groups": {n: {"unknown": dict(g.unknown), "illegal": dict(g.illegal)}
                                      for n, g in GROUPS.items()}}
    path.with_suffix(".json").write_text(json.dumps(extra))
    export = {}
    for g in GROUPS.values():
        export.update(g._export())
    tmp = path.with_suffix(".yml.tmp")
    cc.CoverageDB.export_to_yaml(export, str(tmp))  # the method, on a part of coverage_db
    tmp.replace(path)  # the YAML last: merge_dir reads the files that have one
    return path


def _dump_at_exit() -> None:
    if _on:
        dump()


atexit.register(_dump_at_exit)


def merge_files(paths: Iterable[str | os.PathLike]) -> tuple[dict[str, CoverGroup], int]:
    """Add up the files of many processes (:func:`dump`).

    The YAML files are merged by cocotb-coverage's ``merge_coverage``; the JSON beside each
    adds its unknown and illegal values.

    Parameters
    ----------
    paths : iterable of str or os.PathLike
        The YAML files.

    Returns
    -------
    tuple of (dict of str to CoverGroup, int)
        Fresh groups (:func:`new_groups`) with the counts of every file added, and how many
        files there were.
    """
    paths = [Path(p) for p in paths]
    groups = new_groups()
    if not paths:
        return groups, 0
    with tempfile.TemporaryDirectory() as tmp:
        merged = Path(tmp) / "merged.yml"
        cc.merge_coverage(lambda _msg: None, str(merged), *map(str, paths))
        data = yaml.safe_load(merged.read_text()) or {}
    for name, g in groups.items():
        prefix = f"{name}."
        g.merge({"items": {k[len(prefix):]: v["bins:_hits"] for k, v in data.items()
                           if k.startswith(prefix) and "bins:_hits" in v}})
    for path in paths:
        side = path.with_suffix(".json")
        extra = json.loads(side.read_text()) if side.exists() else {}
        for name, counts in extra.get("groups", {}).items():
            if name in groups:
                groups[name].merge(counts)
    return groups, len(paths)


def merge_dir(directory: str | os.PathLike) -> tuple[dict[str, CoverGroup], int]:
    """:func:`merge_files` over every ``*.yml`` in a directory.

    Parameters
    ----------
    directory : str or os.PathLike
        A :data:`ENV_DIR` directory.

    Returns
    -------
    tuple of (dict of str to CoverGroup, int)
        As :func:`merge_files`.
    """
    return merge_files(sorted(Path(directory).glob("*.yml")))


def summary(groups: dict[str, CoverGroup]) -> dict:
    """Every group's :meth:`CoverGroup.report`, by name.

    Parameters
    ----------
    groups : dict of str to CoverGroup
        The groups.

    Returns
    -------
    dict
        Group name -> its report.
    """
    return {name: g.report() for name, g in groups.items()}


# --- samplers: the testbenches' hooks (no-ops when coverage is off) --------------------------


def _class_names(bits, fmt) -> set[str]:
    return {VALUE_CLASSES[i] for i in np.unique(value_classes(bits, fmt)).tolist()}


def _size_class(v: int, n: int) -> str:
    return "1" if v == 1 else ("N" if v == n else "between")


def te_stationary(prog, tile, fmt: str) -> None:
    """A LOAD_STATIONARY of ``tile`` (K x M bit patterns) added to ``prog`` (a
    ``sim.host.tensor_engine.TensorEngineProgram``): remembered for the multiplications that use
    it."""
    if not _on:
        return
    prog._cov_stationary = (np.asarray(tile), fmt)


def te_moving(prog, phase, moving, fmt: str, accumulate: bool) -> None:
    """A MULTIPLY_MOVING of ``moving`` (K x F) added to ``phase``: counted once the testbench
    has run the phase on the RTL (:func:`te_phase`)."""
    if not _on:
        return
    tile, s_fmt = prog._cov_stationary
    moving = np.asarray(moving)
    n, words = prog.cfg.n, prog.cfg.words
    k, m = tile.shape
    f = moving.shape[1]
    s_cls, m_cls = value_classes(tile, s_fmt), value_classes(moving, fmt)
    pairs = set()
    for row in range(k):
        for a in np.unique(s_cls[row]).tolist():
            for b in np.unique(m_cls[row]).tolist():
                pairs.add((VALUE_CLASSES[a], VALUE_CLASSES[b]))
    fcls = "1" if f == 1 else "2..N" if f <= n else "bank" if f == words else "N+1..bank-1"
    rec = dict(s_fmt=s_fmt, m_fmt=fmt, mode="accumulate" if accumulate else "overwrite",
               s_class={VALUE_CLASSES[i] for i in np.unique(s_cls).tolist()},
               m_class={VALUE_CLASSES[i] for i in np.unique(m_cls).tolist()},
               k=_size_class(k, n), m=_size_class(m, n), f=fcls)
    if not hasattr(phase, "_cov"):
        phase._cov = []
    phase._cov.append((rec, pairs))


def te_phase(phase) -> None:
    """The testbench ran ``phase`` on the RTL: count its multiplications."""
    if not _on:
        return
    g = GROUPS["tensor_engine"]
    tiles = [c for c in g.crosses if c not in (_PAIRS, _PRODUCTS)]
    for rec, pairs in getattr(phase, "_cov", ()):
        g.sample(crosses=tiles, **rec)
        # The products: each (stationary class, moving class) pair multiplied in one row.
        for a, b in pairs:
            g.sample(crosses=(_PAIRS, _PRODUCTS), points=False, s_fmt=rec["s_fmt"],
                     m_fmt=rec["m_fmt"], s_class=a, m_class=b)
    phase._cov = []


def te_psum(row, defined) -> None:
    """One PSUM row drained from the RTL (fp32 words; ``defined``: the words this program
    wrote): count the class of each defined word."""
    if not _on:
        return
    row = np.asarray(row)[np.asarray(defined, dtype=bool)]
    if row.size:
        names = [VALUE_CLASSES[i] for i in np.unique(value_classes(row, "fp32")).tolist()]
        GROUPS["tensor_engine"].sample(psum_class=names)


_SRU_BUFFER: list = []
_SRU_BATCH = 4096


def sru_beats(tb, items, results) -> None:
    """Beats driven into the SRU (``sim.tb.sru.Beat`` among ``items``) and the RTL's output
    beats ``results`` (``(lanes, invalid)``, in beat order)."""
    if not _on:
        return
    beats = [it for it in items if hasattr(it, "saturate")]
    for beat, (lanes, invalid) in zip(beats, results, strict=False):
        _SRU_BUFFER.append((beat, lanes, invalid, tb.built))
    if len(_SRU_BUFFER) >= _SRU_BATCH:
        _sru_flush()


def _sru_flush() -> None:
    from hdl.formats import Dtype, Rounding

    if not _SRU_BUFFER:
        return
    names = {d.value: d.golden_name for d in Dtype}
    modes = {m.value: m.golden_name for m in Rounding}
    g = GROUPS["sru"]
    by_combo: dict[tuple, list] = {}
    for beat, lanes, invalid, built in _SRU_BUFFER:
        if beat.dtype not in names:
            g.sample(invalid="reserved_dtype")
        elif beat.dtype not in built:
            g.sample(invalid="unbuilt_dtype")
        elif beat.mode not in modes:
            g.sample(invalid="reserved_mode")
        elif not invalid:
            combo = (names[beat.dtype], modes[beat.mode], "on" if beat.saturate else "off")
            by_combo.setdefault(combo, []).append((beat.x, lanes))
    _SRU_BUFFER.clear()
    for (dtype, mode, sat), rows in by_combo.items():
        x = np.concatenate([np.asarray(r[0], dtype=np.int64) for r in rows])
        out = np.concatenate([np.asarray(r[1], dtype=np.int64) for r in rows])
        counts = Counter(zip(sru_input_classes(x, dtype).tolist(),
                             _sru_outcomes(x, out, dtype).tolist(),
                             value_classes(out, dtype).tolist(), strict=True))
        for (ic, oc, cls), n in counts.items():
            g.sample(n, dtype=dtype, mode=mode, saturate=sat, in_class=SRU_INPUT_CLASSES[ic],
                     outcome=SRU_OUTCOMES[oc], out_class=VALUE_CLASSES[cls])


def core_program(program, result, stopped: bool) -> None:
    """A program pushed to a NeuronCore (``program``: descriptors) and the RTL's
    ``sim.host.driver.RunResult``; ``stopped``: the queue was stopped by an earlier error, so the
    core dropped the whole program. The commands up to the failing one reached the sequencer:
    the first after an idle core, the others back to back."""
    if not _on:
        return
    from golden.isa import Opcode

    g = GROUPS["sequencer"]
    if stopped:
        g.sample(program="dropped_while_stopped")
        return
    error = result.error.name
    last = len(program) - 1 if result.error_index is None else result.error_index
    prev = "idle"
    for words in list(program)[:last + 1]:
        code = int(np.asarray(words, dtype=np.uint32).reshape(-1)[0]) & 0xF
        op = Opcode(code).name if code in Opcode._value2member_map_ else "ILLEGAL"
        g.sample(op=op, prev=prev, gap="after_idle" if prev == "idle" else "back_to_back")
        prev = op
    g.sample(error=error, program="completed" if error == "OK" else "failed")
    if error != "OK" and program:
        g.sample(fail_op=prev, error=error)
