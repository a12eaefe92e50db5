"""The training step on the cores (``sim.kernels.training``) and the run (``sim.host.training``)
on the golden ISS: one step means the MLP's gradient step (against a float64 statement of the
same maths, with the kernel's bf16 roundings of the tensor engine's operands), every core ends
with the same weights, bf16 updates are roundings of the fp32 update (SR to a neighbour, RNE
to the nearest), the run learns, and the RTL's program of the first steps is the same run."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from golden.iss import ErrorCode, NeuronCoreISS, RingISS
from sim.host import training as tr
from sim.kernels import KernelError
from sim.kernels.run import core_config, read_tensor
from sim.kernels.training import Mlp, ParamLayout, from_tiles, to_tiles, trace_steps


def _bf16(a):
    return np.asarray(a, np.float64).astype(np.float32).astype(ml_dtypes.bfloat16) \
        .astype(np.float64)


def test_row_tiles_round_trip(seed):
    rng = np.random.default_rng(seed)
    for rows, cols, n in ((10, 3, 4), (8, 5, 8), (1, 1, 4), (17, 2, 8)):
        a = rng.standard_normal((rows, cols)).astype(np.float32)
        t = to_tiles(a, n)
        assert t.shape == (n, -(-rows // n) * cols)
        assert t[3 % n, (3 // n) * cols + 1] == a[3, 1] if rows > 3 and cols > 1 else True
        assert np.array_equal(from_tiles(t, rows, cols), a), (rows, cols, n, seed)


def test_parameter_block_round_trip(seed):
    mlp = Mlp(inputs=12, hidden=6, classes=3, batch=4)
    lay = ParamLayout(mlp, 4)
    assert (lay.w1, lay.w2, lay.b1, lay.b2, lay.words) == (0, 18, 24, 26, 27)
    p = tr.init_params(mlp, seed)
    p["b1"] = np.arange(6, dtype=np.float32).reshape(6, 1)
    back = lay.unpack(lay.pack(p, np.float32))
    for name in p:
        assert np.array_equal(back[name], p[name]), name


def _reference_step(params: dict, shards: list, lr: float) -> tuple[dict, float]:
    """One step in float64 of the module's equations: the operands the tensor engine takes
    (X, H, dZ, dH * (H > 0), the weights) rounded to bf16 as the kernel rounds them."""
    w1, w2 = (_bf16(params[k]) for k in ("w1", "w2"))
    b1, b2 = (np.asarray(params[k], np.float64) for k in ("b1", "b2"))
    bg = sum(x.shape[1] for x, _ in shards)
    g = {k: 0.0 for k in params}
    loss = 0.0
    for x, y in shards:
        x = _bf16(x)
        h = _bf16(np.maximum(w1.T @ x + b1, 0))
        d = w2.T @ h + b2 - y
        dz = d / bg
        loss += np.sum(d * d) / (2 * bg)
        g["w2"] = g["w2"] + h @ _bf16(dz).T
        g["b2"] = g["b2"] + dz.sum(axis=1, keepdims=True)
        dhp = (w2 @ _bf16(dz)) * (h > 0)
        g["w1"] = g["w1"] + x @ _bf16(dhp).T
        g["b1"] = g["b1"] + dhp.sum(axis=1, keepdims=True)
    return {k: np.asarray(params[k], np.float64) - lr * g[k] for k in params}, loss


STEP_MLP = Mlp(inputs=20, hidden=12, classes=5, batch=4)


def _one_step(mode: str, seed: int, *, mlp=STEP_MLP, cores: int = 3, lr: float = 0.25):
    params = {"n": 4, "sbuf_words": 512, "psum_banks": 2, "psum_words": 16, "link_width": 2,
              "ranks": cores}
    cfg = core_config(params)
    lay = ParamLayout(mlp, cfg.n)
    rng = np.random.default_rng(seed)
    p0 = tr.init_params(mlp, seed)
    p0["b1"] = _bf16(rng.standard_normal((mlp.hidden, 1)) * 0.1).astype(np.float32)
    p0["b2"] = _bf16(rng.standard_normal((mlp.classes, 1)) * 0.1).astype(np.float32)
    shards = [(rng.random((mlp.inputs, mlp.batch)).astype(np.float32),
               np.eye(mlp.classes, dtype=np.float32)[rng.integers(0, mlp.classes,
                                                                  mlp.batch)].T)
              for _ in range(cores)]
    dtype = np.float32 if mode == "fp32" else ml_dtypes.bfloat16
    traced = [trace_steps(cfg, mlp, mode=mode, lr=lr, params=lay.pack(p0, dtype),
                          batches=[shards[r]], seed=seed, rank=r, ranks=cores)
              for r in range(cores)]
    isses = [NeuronCoreISS(cfg, dram=k.dram) for k, _ in traced]
    assert RingISS(isses).run([k.program for k, _ in traced]) == [ErrorCode.OK] * cores
    t = traced[0][1]
    blocks = [read_tensor(iss.dram, t.params) for iss in isses]
    for b in blocks[1:]:
        assert b.tobytes() == blocks[0].tobytes(), f"the cores' weights differ (seed {seed})"
    losses = {float(read_tensor(iss.dram, t.loss)[0, 0]) for iss in isses}
    assert len(losses) == 1
    want, loss = _reference_step(p0, shards, lr)
    return lay.unpack(blocks[0]), want, losses.pop(), loss, p0


def test_a_step_is_the_gradient_step(seed):
    """fp32 master weights: the ISS's step equals float64's within fp32 rounding (and a rare
    bf16 operand rounded the other way), the loss too."""
    got, want, loss, want_loss, p0 = _one_step("fp32", seed)
    assert loss == pytest.approx(want_loss, rel=1e-5), seed
    for name in got:
        step = np.abs(want[name] - p0[name]).max()
        assert step > 0, name
        np.testing.assert_allclose(got[name], want[name], rtol=0, atol=2e-3 * step + 1e-7,
                                   err_msg=f"{name}, seed {seed}")


def _bf16_below(v: np.ndarray) -> np.ndarray:
    """The largest bf16 value <= v (elementwise, finite v)."""
    b = _bf16(v)
    bits = b.astype(np.float32).astype(ml_dtypes.bfloat16).view(np.uint16).astype(np.int32)
    step_down = np.where(b > 0, bits - 1, np.where(b < 0, bits + 1, 0x8001))
    down = step_down.astype(np.uint16).view(ml_dtypes.bfloat16).astype(np.float64)
    return np.where(b <= v, b, down)


def _bf16_above(v: np.ndarray) -> np.ndarray:
    return -_bf16_below(-v)


@pytest.mark.parametrize("mode", ["rne", "sr"])
def test_bf16_updates_round_the_fp32_update(mode, seed):
    """bf16 weights: each new weight is a bf16 value next to the update w - lr * g (RNE: the
    nearest, SR: the one below or the one above, each sometimes), up to the fp32 update's own
    distance from float64's."""
    got, want, _, _, p0 = _one_step(mode, seed, lr=0.5)
    far = 0
    for name in got:
        v, g = want[name].ravel(), got[name].ravel().astype(np.float64)
        eps = 2e-3 * np.abs(want[name] - p0[name]).max() + 1e-7
        if mode == "rne":
            ok = (_bf16(v - eps) <= g) & (g <= _bf16(v + eps))
        else:
            ok = (_bf16_below(v - eps) <= g) & (g <= _bf16_above(v + eps))
        bad = np.flatnonzero(~ok)
        assert bad.size == 0, (
            f"{mode}, seed {seed}: {bad.size} of {v.size} new {name} values are not a bf16 "
            f"value next to the update w - lr * g; first at {bad[0]}: got "
            f"{g[bad[:3]]}, the update {v[bad[:3]]}, w was {p0[name].ravel()[bad[:3]]}")
        far += int(np.sum(g != _bf16(v)))
    if mode == "sr":
        assert far > 0, f"SR never rounded away from the nearest (seed {seed})"


def test_the_kernel_refuses_what_it_cannot_tile():
    cfg = core_config({"n": 4, "sbuf_words": 512, "psum_banks": 2, "psum_words": 8,
                       "link_width": 2, "ranks": 2})
    mlp = Mlp(inputs=8, hidden=12, classes=3, batch=4)
    lay = ParamLayout(mlp, 4)
    with pytest.raises(KernelError, match="hidden = 12 is wider than a PSUM bank"):
        trace_steps(cfg, mlp, mode="sr", lr=0.1, params=lay.pack(tr.init_params(mlp), np.float32),
                    batches=[], seed=1, ranks=2)
    with pytest.raises(ValueError, match="mode must be one of"):
        trace_steps(cfg, mlp, mode="bf16", lr=0.1, params=None, batches=[], seed=1)
    with pytest.raises(ValueError, match="batch must be a positive integer, not 0"):
        Mlp(batch=0)


def test_run_learns_and_cores_agree(seed):
    """60 steps at the default learning rate: the loss falls, the test accuracy rises far above
    chance, every core holds the same weights."""
    r = tr.train(60, tr.TrainSetup(mode="sr", seed=seed), eval_every=30)
    assert r["same_on_every_core"], seed
    assert np.mean(r["loss"][-10:]) < 0.6 * np.mean(r["loss"][:5]), (seed, r["loss"])
    assert r["accuracy"][-1][1] > 0.5, (seed, r["accuracy"])
    assert len(r["loss"]) == len(r["moved"]) == 60


def test_program_of_steps_is_the_run(seed):
    """The RTL's program (every step's batch in DRAM, one program) ends with the parameters
    and losses of the per-step run on the ISS."""
    setup = tr.TrainSetup(mode="sr", seed=seed)
    r = tr.train(3, setup, eval_every=1)
    isses, t = tr.run_program_on_iss(setup, 3)
    block = read_tensor(isses[0].dram, t.params)
    assert block.tobytes() == setup.layout().pack(
        {k: np.array(v, np.float32) for k, v in r["params"].items()},
        setup.params_dtype).tobytes(), seed
    assert read_tensor(isses[0].dram, t.loss)[0].tolist() == \
        [float(np.float32(v)) for v in r["loss"]], seed


def test_setup_errors_name_the_parameter():
    with pytest.raises(ValueError, match="rounding must be one of sr, rne, fp32"):
        tr.TrainSetup(mode="bf16")
    with pytest.raises(ValueError, match="cores must be an integer >= 2"):
        tr.TrainSetup(cores=1)
    with pytest.raises(ValueError, match="steps must be a positive integer"):
        tr.train(0)
    setup = tr.TrainSetup()
    most = tr.rtl_steps_max(setup)
    with pytest.raises(ValueError, match=f"the RTL runs at most {most} steps"):
        tr.train(most + 1, setup, on="verilator")


def test_rtl_steps_max_is_what_fits():
    """The limit is the tracer's: that many steps trace, one more overflows DRAM."""
    from sim.host.training import _Data, _trace

    for mode in ("sr", "fp32"):
        setup = tr.TrainSetup(mode=mode)
        most = tr.rtl_steps_max(setup)
        assert most > 10
        _trace(setup, _Data(setup, most), range(most), True)
        with pytest.raises(KernelError, match="DRAM overflow"):
            _trace(setup, _Data(setup, most + 1), range(most + 1), True)


#: A small ring for the RTL: two cores of N = 4 with shallow tensor-engine pipelines (a quick
#: build) and a small MLP; the same kernel code as the digits run's.
RTL_RING = {"ranks": 2, "n": 4, "sbuf_words": 192, "psum_banks": 2, "psum_words": 8,
            "link_width": 2, "queue_depth": 32, "te_mul_stages": 1, "te_add_stages": 2,
            "dram_bytes": 4096}
RTL_MLP = Mlp(inputs=8, hidden=6, classes=3, batch=4)


@pytest.mark.parametrize("mode", ["sr", "fp32"])
def test_training_steps_on_rtl(simulator, mode, seed):
    """Two steps of the training kernel on a ring of RTL cores: every byte of DRAM and every
    SBUF and PSUM word of both cores equal to the ISS'."""
    from sim.kernels.run import TracedKernel, run_traced_rtl

    setup = tr.TrainSetup(mode=mode, cores=2, seed=seed, mlp=RTL_MLP, lr=0.25,
                          config={k: v for k, v in RTL_RING.items() if k != "ranks"})
    rng = np.random.default_rng(seed)
    batches = [[(rng.standard_normal((8, 4)).astype(np.float32),
                 np.eye(3, dtype=np.float32)[rng.integers(0, 3, 4)].T) for _ in range(2)]
               for _ in range(2)]
    cfg = setup.cfg()
    lay = setup.layout()
    p0 = lay.pack(tr.init_params(RTL_MLP, seed), setup.params_dtype)
    traced = [trace_steps(cfg, RTL_MLP, mode=mode, lr=0.25, params=p0, batches=batches[r],
                          seed=seed, rank=r, ranks=2) for r in range(2)]
    tk = TracedKernel(setup.core_params(), [k for k, _ in traced],
                      [{"params": t.params} for _, t in traced])
    fig = run_traced_rtl(tk, simulator, seed, False)
    assert fig["bit_exact"], f"{fig['mismatch']} (seed {seed})"
    assert all(c > 0 for c in fig["cycles"])


def test_sr_follows_fp32_where_rne_stalls(seed):
    """The measured claim of the README's plot, on a short run: at a small learning rate most
    bf16 updates are below half an ulp of their weight, RNE drops them (its loss stays well
    above fp32's) while SR keeps them on average (its loss within 2 % of fp32's)."""
    tail = {}
    for mode in ("fp32", "rne", "sr"):
        r = tr.train(100, tr.TrainSetup(mode=mode, lr=0.01, seed=seed), eval_every=100)
        tail[mode] = float(np.mean(r["loss"][-30:]))
    said = (f"seed {seed}, lr 0.01, mean loss of the last 30 of 100 steps: "
            + ", ".join(f"{k} {v:.4f}" for k, v in tail.items()))
    assert abs(tail["sr"] - tail["fp32"]) < 0.02 * tail["fp32"], (
        f"{said}: SR's should be within 2 % of fp32's (SR keeps, on average, the updates "
        "below half a bf16 ulp)")
    assert tail["rne"] > 1.08 * tail["fp32"], (
        f"{said}: RNE's should stay 8 % or more above fp32's (RNE drops the updates below "
        "half a bf16 ulp)")
