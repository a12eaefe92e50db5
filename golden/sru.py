"""The stochastic-rounding unit as a stream of beats: casts plus the per-lane PRNG.

A beat is ``lanes`` fp32 values cast to one target with one mode and saturation flag
(:func:`golden.rounding.round_fp32`). An SR beat to a narrow target (bf16, fp16, fp8) takes
one draw from every lane's generator (:class:`golden.prng.LanePRNG`), lane ``l`` rounding with
its own draw; RNE, RTZ and fp32-passthrough beats leave the generators alone. This is the
draw order of docs/contract.md §4 ("Randomness") for the SRU and for the activation engine,
which casts through it.

This module is numpy only.
"""

from __future__ import annotations

import numpy as np

from golden.prng import LanePRNG
from golden.rounding import CAST_FORMATS, MODES, round_fp32

__all__ = ["SruModel"]


class SruModel:
    """``lanes`` cast lanes with their generators, seeded with ``seed`` (0 after reset)."""

    def __init__(self, lanes: int, *, random_bits: int = 16, seed: int = 0):
        self.prng = LanePRNG(lanes, seed)
        self.lanes = self.prng.lanes
        if (isinstance(random_bits, bool) or not isinstance(random_bits, int)
                or not 1 <= random_bits <= 32):
            raise ValueError(f"random_bits must be an integer in [1, 32], not {random_bits!r}")
        self.random_bits = random_bits

    def reseed(self, seed: int) -> None:
        """``SET_SEED``: restart every lane's generator from ``seed``."""
        self.prng.seed(seed)

    def beat(self, x_bits, fmt: str, mode: str, saturate: bool) -> np.ndarray:
        """Cast one beat: ``x_bits`` is ``(lanes,)`` fp32 patterns; returns the ``(lanes,)``
        result patterns as uint32 (narrow results zero-extended)."""
        x = np.asarray(x_bits)
        if x.shape != (self.lanes,):
            raise ValueError(f"x_bits must have shape ({self.lanes},), not {x.shape}")
        if fmt not in CAST_FORMATS:
            raise ValueError(f"fmt must be one of {list(CAST_FORMATS)}, not {fmt!r}")
        if mode not in MODES:
            raise ValueError(f"mode must be one of {list(MODES)}, not {mode!r}")
        out = round_fp32(x, fmt, mode, saturate=bool(saturate), r=self.random_bits,
                         rng=self.prng)  # draws only for SR to a narrow target
        return out.astype(np.uint32)

    def run(self, x_bits, fmts, modes, saturates) -> np.ndarray:
        """Cast ``n`` beats in order: ``x_bits`` ``(n, lanes)``, and per beat a format, mode
        and saturation flag (sequences of length ``n``). Returns ``(n, lanes)`` uint32: what
        :meth:`beat` gives beat after beat, the generators advanced alike (the SR beats to a
        narrow target take their draws in beat order; each kind of beat is cast at once)."""
        x = np.asarray(x_bits)
        n = len(x)
        if not len(fmts) == len(modes) == len(saturates) == n:
            raise ValueError("x_bits, fmts, modes and saturates must have the same length")
        if n and x.shape[1:] != (self.lanes,):
            raise ValueError(f"x_bits must have shape (n, {self.lanes}), not {x.shape}")
        kinds: dict[tuple, list[int]] = {}
        drawing = []  # the beats that take a draw, in order
        for t, (fmt, mode, saturate) in enumerate(zip(fmts, modes, saturates, strict=True)):
            if fmt not in CAST_FORMATS:
                raise ValueError(f"fmt must be one of {list(CAST_FORMATS)}, not {fmt!r}")
            if mode not in MODES:
                raise ValueError(f"mode must be one of {list(MODES)}, not {mode!r}")
            kinds.setdefault((fmt, mode, bool(saturate)), []).append(t)
            if mode == "sr" and fmt != "fp32":
                drawing.append(t)
        draws = np.zeros((n, self.lanes), dtype=np.uint32)
        draws[drawing] = self.prng.draws(len(drawing), self.random_bits)
        out = np.empty((n, self.lanes), dtype=np.uint32)
        for (fmt, mode, saturate), beats in kinds.items():
            out[beats] = round_fp32(x[beats], fmt, mode, saturate=saturate, r=self.random_bits,
                                    rbits=draws[beats] if mode == "sr" else None)
        return out
