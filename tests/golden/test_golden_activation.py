"""golden.activation against plain numpy float32 arithmetic and the golden SRU.

References: ``np.float32`` multiply then add (two roundings, no FMA) with NaNs made canonical,
and relu written as a float comparison; the cast through ``golden.sru.SruModel`` beat by beat
(the activation model must draw exactly as the SRU does). Seed: ``NCLITE_SEED``.
"""

import numpy as np
import pytest

from golden.activation import ActivationFunc, ActivationModel, pre_cast, relu_bits
from golden.sru import SruModel
from sim.tb import vectors

CANON = np.uint32(0x7FC00000)


def _ref_pre_cast(x, scale, bias, func):
    with np.errstate(all="ignore"):
        xf = x.view(np.float32)
        y = (xf * np.float32(np.uint32(scale).view(np.float32))) + bias.view(np.float32)
        if func == ActivationFunc.RELU:
            y = np.where(np.isnan(y) | (y > 0), y, np.float32(0.0))
    return np.where(np.isnan(y), CANON, y.view(np.uint32)).astype(np.uint32)


@pytest.mark.parametrize("func", list(ActivationFunc))
def test_pre_cast_matches_float32(func, seed):
    rng = np.random.default_rng([seed, 11, int(func)])
    lanes = 5
    for _ in range(40):
        x = vectors.operands("fp32", rng, (50, lanes), 0.05).astype(np.uint32)
        bias = vectors.operands("fp32", rng, (lanes,), 0.2).astype(np.uint32)
        scale = int(vectors.operands("fp32", rng, (1,), 0.2)[0])
        got = pre_cast(x, func, scale, bias)
        want = _ref_pre_cast(x, scale, bias, func)
        assert np.array_equal(got, want), f"seed {seed}, scale 0x{scale:08x}"


def test_relu_special_values():
    y = np.array([0x00000000, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0x00000001,
                  0x80000001, 0x3F800000, 0xBF800000], dtype=np.uint32)
    want = np.array([0, 0, 0x7F800000, 0, 0x7FC00000, 1, 0, 0x3F800000, 0], dtype=np.uint32)
    assert np.array_equal(relu_bits(y), want)


def test_model_casts_through_the_sru_with_its_draws(seed):
    rng = np.random.default_rng([seed, 12])
    lanes = 4
    model, sru = ActivationModel(lanes, seed=5), SruModel(lanes, seed=5)
    for fmt in ("bf16", "fp16", "fp8_e4m3", "fp8_e5m2", "fp32"):
        for mode in ("rne", "rtz", "sr"):
            x = vectors.operands("fp32", rng, (7, lanes), 0.05).astype(np.uint32)
            bias = vectors.operands("fp32", rng, (lanes,), 0.0).astype(np.uint32)
            got = model.command(x, func=ActivationFunc.RELU, scale_bits=0x3FC00000,
                                bias_bits=bias, fmt=fmt, mode=mode, saturate=True)
            y = _ref_pre_cast(x, 0x3FC00000, bias, ActivationFunc.RELU)
            want = np.stack([sru.beat(row, fmt, mode, True) for row in y])
            assert np.array_equal(got, want), f"{fmt} {mode} seed {seed}"


def test_bad_func():
    with pytest.raises(ValueError):
        pre_cast(np.zeros(2, np.uint32), 3, 0, np.zeros(2, np.uint32))
