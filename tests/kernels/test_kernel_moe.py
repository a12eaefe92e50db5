"""The expert-parallel MoE layer (``sim.kernels.moe``) on a ring of four ISS cores: every token's
output is its gate times its expert's MLP applied to it alone (a single-core run of that expert,
bit for bit), a dropped token's is +0, and the whole is close to float64 maths. (The RTL run:
``test_kernel_rtl.py``.)"""

from __future__ import annotations

import types

import numpy as np
import pytest

from golden.isa import ActivationFunc, Dtype
from sim.kernels import KernelError, moe, nl, run_kernel, trace_kernel
from sim.kernels.library import Workspace, dense, gemm


def _inputs(seed: int) -> list[dict]:
    rng = np.random.default_rng(seed)
    return [moe.inputs(rng, r) for r in range(moe.CORES)]


def _expert_alone(ins: dict, w: dict) -> np.ndarray:
    """Expert ``w``'s MLP on every token of ``ins`` on one ISS core (fp32, d x T)."""
    def kernel(x, w1, b1, w2, b2):
        ws = Workspace()
        h = dense(ws, w1, x, b1, dtype=Dtype.BF16, in_sbuf=True)
        y = nl.ndarray(x.shape, nl.float32, buffer=nl.shared_hbm)
        gemm(ws, w2, h, y, bias=b2, func=ActivationFunc.IDENTITY)
        return y

    module = types.SimpleNamespace(
        kernel=kernel, CONFIG={k: v for k, v in moe.CONFIG.items()}, CORES=1,
        inputs=lambda rng: {"x": ins["x"], **{k: w[k] for k in ("w1", "b1", "w2", "b2")}},
        __file__="expert-alone")
    return run_kernel(module)["outputs"]["out"][0]


@pytest.mark.parametrize("seed", [0, 5])
def test_moe_tokens_are_their_experts(seed):
    ins = _inputs(seed)
    r = run_kernel(moe, seed=seed)
    outs = r["outputs"]["out"]
    kept = dropped = 0
    for rank, core in enumerate(ins):
        experts, gates, route = moe.routing(core["x"], core["router"], moe.CORES)
        alone = {e: _expert_alone(core, ins[e]) for e in set(experts.tolist())}
        for t, s in enumerate(route):
            got = outs[rank][:, t].view(np.uint32)
            if s is None:
                assert not got.any(), f"seed {seed}: dropped token {t} of core {rank}: {got}"
                dropped += 1
                continue
            want = (np.float32(gates[t]) * alone[experts[t]][:, t]).astype(np.float32)
            assert np.array_equal(got, want.view(np.uint32)), (
                f"seed {seed}: core {rank} token {t} (expert {experts[t]}): {outs[rank][:, t]}"
                f" != {want}")
            kept += 1
            # float64 maths of the same token, within bf16's rounding of the hidden layer
            x = core["x"][:, t].astype(np.float64)
            e = ins[experts[t]]
            hid = np.maximum(e["w1"].astype(np.float64).T @ x + e["b1"][:, 0], 0)
            y = e["w2"].astype(np.float64).T @ hid + e["b2"][:, 0]
            assert np.allclose(got.view(np.float32), gates[t] * y, rtol=2e-2, atol=2e-2)
    assert kept > 0 and dropped > 0, (kept, dropped)  # (these seeds drop a token or more)
    assert kept + dropped == moe.CORES * moe.T


def test_routes_and_slots():
    e, g = moe.top1(np.array([[0.0, 1.0, 1.0], [2.0, -1.0, 0.5]], np.float32))
    assert e.tolist() == [1, 0]  # a tie goes to the lower index
    assert np.isclose(g[0], np.exp(1) / (1 + 2 * np.exp(1)))
    assert moe.slots([1, 1, 0, 1, 1], 2, 2) == [(1, 0), (1, 1), (0, 0), None, None]
    with pytest.raises(KernelError, match="expert 3 outside 0..1"):
        moe.slots([3], 2, 1)


def test_token_width_must_fit_the_link():
    def inputs(rng, rank):
        return {**moe.inputs(rng, rank), "x": rng.standard_normal((6, moe.T)).astype(nl.bfloat16),
                "router": rng.standard_normal((6, moe.CORES)).astype(np.float32)}

    module = types.SimpleNamespace(kernel=moe.kernel, CONFIG=moe.CONFIG, CORES=moe.CORES,
                                   inputs=inputs, __file__="moe-bad")
    with pytest.raises(KernelError, match="d = 6 must be a multiple of the link width 4"):
        trace_kernel(module, cores=4)
