"""Per-lane pseudo-random generator of the stochastic-rounding unit (docs/contract.md §2, §4
"Randomness"). This docstring is the contract the RTL follows bit for bit.

Generator (one per lane): Marsaglia's XORWOW as in cuRAND (and as Trainium3 documents it,
6 x u32 state): five xorshift words ``v[0..4]`` and a Weyl counter ``d``. One step, all
arithmetic modulo 2**32::

    t = v[0] ^ (v[0] >> 2)
    v[0], v[1], v[2], v[3] = v[1], v[2], v[3], v[4]
    v[4] = (v[4] ^ (v[4] << 4)) ^ (t ^ (t << 1))
    d = d + 362437
    return v[4] + d

Seeding, from a 64-bit ``seed`` (0 <= seed < 2**64; 0 is the default, as on Neuron) and the
lane index ``L`` (0-based). With ``G = 0x9E3779B97F4A7C15`` and splitmix64's finaliser
``mix64(z)``: ``z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9; z = (z ^ (z >> 27)) *
0x94D049BB133111EB; z ^ (z >> 31)`` (all modulo 2**64)::

    K   = mix64(seed + G)                 # seed key
    s   = mix64(K ^ L)                    # lane key: avalanche-mixed, unrelated per lane
    w_i = mix64(s + (i + 1) * G), i = 0, 1, 2   # splitmix64 stream from state s
    v[0], v[1] = lo32(w_0), hi32(w_0)
    v[2], v[3] = lo32(w_1), hi32(w_1)
    v[4], d    = lo32(w_2), hi32(w_2)
    if v[0..4] are all zero: v[0] = 1     # (never seen in practice; xorshift needs a 1 bit)

So each lane starts at an independent, well-mixed point; no lane is another lane's stream
shifted by some number of steps (by construction, not by chance, except with negligible
probability).

Draw order: all lanes step in parallel, one step per lane per element. A stochastic rounding
of r bits (1 <= r <= 32) uses ``R = next_u32() >> (32 - r)`` (the top r bits of the output);
element ``t`` of lane ``L`` (t = 0, 1, ... in the order the lane processes elements) uses the
lane's ``t``-th draw after seeding. Only SR casts draw; RNE/RTZ casts do not advance the
generator. ``SET_SEED`` reseeds every lane as above.

This module is numpy only.
"""

from __future__ import annotations

import numpy as np

__all__ = ["LanePRNG", "mix64", "lane_state"]

_U64 = np.uint64
_U32 = np.uint32
_G = _U64(0x9E3779B97F4A7C15)
_M1 = _U64(0xBF58476D1CE4E5B9)
_M2 = _U64(0x94D049BB133111EB)
WEYL = 362437


def mix64(z) -> np.ndarray:
    """splitmix64's finaliser on a uint64 array (modulo 2**64)."""
    z = np.asarray(z, dtype=_U64).copy()
    with np.errstate(over="ignore"):
        z = (z ^ (z >> _U64(30))) * _M1
        z = (z ^ (z >> _U64(27))) * _M2
    return z ^ (z >> _U64(31))


def lane_state(seed: int, lanes: int) -> np.ndarray:
    """Initial state of every lane: a ``(lanes, 6)`` uint32 array ``v[0..4], d``."""
    seed = _check_int(seed, "seed", 0, 1 << 64)
    lanes = _check_int(lanes, "lanes", 1, 1 << 32)
    with np.errstate(over="ignore"):
        k = mix64(np.array([seed], dtype=_U64) + _G)
        s = mix64(k ^ np.arange(lanes, dtype=_U64))
        w = [mix64(s + _U64(i + 1) * _G) for i in range(3)]
    st = np.empty((lanes, 6), dtype=_U32)
    for i, wi in enumerate(w):
        st[:, 2 * i] = (wi & _U64(0xFFFFFFFF)).astype(_U32)
        st[:, 2 * i + 1] = (wi >> _U64(32)).astype(_U32)
    zero = ~st[:, :5].any(axis=1)
    st[zero, 0] = 1
    return st


def _check_int(v, name: str, lo: int, hi: int) -> int:
    if isinstance(v, bool) or not isinstance(v, int | np.integer) or not lo <= int(v) < hi:
        raise ValueError(f"{name} must be an integer in [{lo}, {hi}), not {v!r}")
    return int(v)


class LanePRNG:
    """``lanes`` independent XORWOW generators stepped in parallel (see the module doc)."""

    def __init__(self, lanes: int, seed: int = 0):
        self.lanes = _check_int(lanes, "lanes", 1, 1 << 32)
        self.seed(seed)

    def seed(self, seed: int) -> None:
        """Reseed every lane from ``seed`` (``SET_SEED``)."""
        st = lane_state(seed, self.lanes)
        self._v = [st[:, i].copy() for i in range(5)]
        self._d = st[:, 5].copy()

    @property
    def state(self) -> np.ndarray:
        """The current state, ``(lanes, 6)`` uint32: ``v[0..4], d`` (a copy)."""
        return np.stack(self._v + [self._d], axis=1)

    @state.setter
    def state(self, st) -> None:
        st = np.asarray(st)
        if st.shape != (self.lanes, 6) or st.dtype != _U32:
            raise ValueError(f"state must be a ({self.lanes}, 6) uint32 array, not "
                             f"{st.shape} {st.dtype}")
        self._v = [st[:, i].copy() for i in range(5)]
        self._d = st[:, 5].copy()

    def next_u32(self) -> np.ndarray:
        """Step every lane once; return the ``(lanes,)`` uint32 outputs."""
        v = self._v
        t = v[0] ^ (v[0] >> _U32(2))
        new = (v[4] ^ (v[4] << _U32(4))) ^ (t ^ (t << _U32(1)))
        self._v = [v[1], v[2], v[3], v[4], new]
        with np.errstate(over="ignore"):
            self._d = self._d + _U32(WEYL)
            return new + self._d

    def draw(self, r: int) -> np.ndarray:
        """One draw per lane: the top ``r`` bits of :meth:`next_u32` (uint32, ``(lanes,)``)."""
        r = _check_int(r, "r", 1, 33)
        return self.next_u32() >> _U32(32 - r)

    def draws(self, n: int, r: int) -> np.ndarray:
        """``n`` successive draws: a ``(n, lanes)`` uint32 array, row t = the t-th draw."""
        n = _check_int(n, "n", 0, 1 << 40)
        r = _check_int(r, "r", 1, 33)
        out = np.empty((n, self.lanes), dtype=_U32)
        for t in range(n):
            out[t] = self.draw(r)
        return out
