"""Training an MLP on scikit-learn's handwritten digits, data-parallel on a ring of cores: the
host's side of ``nclite train``.

The host prepares the data and reads results; every number of the training step is computed
by the cores (``sim.kernels.training``). The host:

* loads the 8 x 8 digits scikit-learn ships (1 797 images, offline), scales them to [0, 1]
  and splits them, with a seed, into a training set and a held-out test set
  (:func:`digits`);
* draws the initial weights (He-scaled normals, rounded to bf16 so that every mode starts from
  the same values) and each step's global batch (an epoch's permutation, seeded), shards it
  over the cores and writes each core's X and one-hot Y into its DRAM;
* runs the step's program on every core and reads the loss (already summed over the cores by
  the all-reduce) and, every ``eval_every`` steps, the parameters, whose test accuracy it
  computes with a float32 forward pass (evaluation, not training: it changes nothing).

On the ISS the run is one program per step (the batch rewritten in DRAM between steps, the
PRNG seeded once, before the first). On the RTL (:func:`train` with ``on`` a simulator) the
first steps of the same run are one program with every step's batch in DRAM, run on
``hdl.sim_top.RingWithDram`` and compared with the ISS in every byte of DRAM, SBUF and PSUM of
every core; its parameters and losses are then compared with the per-step ISS run's.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field

import ml_dtypes
import numpy as np

from golden.iss import ErrorCode, NeuronCoreISS, RingISS
from sim.kernels.run import TracedKernel, core_config, read_tensor, run_traced_rtl
from sim.kernels.training import MODES, Mlp, ParamLayout, batch_tiles, trace_steps

__all__ = ["TRAIN_CONFIG", "MLP", "DEFAULT_LR", "TrainSetup", "digits", "init_params",
           "batch_indices", "shard", "accuracy", "train", "rtl_steps_max",
           "run_program_on_iss"]

#: The cores of the training run: N = 8 (the batch shard of 8 samples is one tile), 1 536 SBUF
#: words a partition (the parameter, fp32 master and gradient blocks and a step's tiles),
#: PSUM banks of 32 words (the hidden layer's width), links of 4 words, 64 KiB of DRAM each
#: (room for about 40 steps' batches in one RTL program).
TRAIN_CONFIG = {"n": 8, "sbuf_words": 1536, "psum_banks": 4, "psum_words": 32,
                "link_width": 4, "queue_depth": 64, "data_width": 64, "dram_bytes": 1 << 16}
#: The model: 64 pixels -> 32 (relu) -> 10 classes, 8 samples a core a step.
MLP = Mlp(inputs=64, hidden=32, classes=10, batch=8)
#: The default learning rate of each mode's run (chosen so that fp32 converges; the same for
#: all modes, so that only the rounding differs).
DEFAULT_LR = 0.5
TEST_FRACTION = 0.2


def digits(seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """scikit-learn's digits (offline), pixels scaled to [0, 1] (float32): ``x_train, y_train,
    x_test, y_test`` (labels int), split by a permutation of ``seed``."""
    from sklearn.datasets import load_digits

    d = load_digits()
    x = (d.data / 16.0).astype(np.float32)
    y = d.target.astype(np.int64)
    order = np.random.default_rng(seed).permutation(len(y))
    test = int(round(TEST_FRACTION * len(y)))
    tr, te = order[test:], order[:test]
    mean = x[tr].mean(axis=0)
    x = (x - mean).astype(np.float32)
    return x[tr], y[tr], x[te], y[te]


def init_params(mlp: Mlp, seed: int = 0) -> dict[str, np.ndarray]:
    """He-scaled normal weights and zero biases, rounded to bf16 (float32 arrays)."""
    rng = np.random.default_rng(seed)

    def bf16(a):
        return np.asarray(a, np.float32).astype(ml_dtypes.bfloat16).astype(np.float32)

    return {"w1": bf16(rng.standard_normal((mlp.inputs, mlp.hidden)) * np.sqrt(2 / mlp.inputs)),
            "w2": bf16(rng.standard_normal((mlp.hidden, mlp.classes)) * np.sqrt(2 / mlp.hidden)),
            "b1": np.zeros((mlp.hidden, 1), np.float32),
            "b2": np.zeros((mlp.classes, 1), np.float32)}


def batch_indices(samples: int, batch_total: int, steps: int, seed: int = 0) -> np.ndarray:
    """The training samples of each step's global batch (steps x batch_total): consecutive
    slices of seeded permutations of the training set (a new permutation each epoch; an
    epoch's last incomplete slice is dropped)."""
    if batch_total > samples:
        raise ValueError(f"a global batch of {batch_total} samples is more than the "
                         f"{samples} of the training set")
    rng = np.random.default_rng(seed + 1)
    per_epoch = samples // batch_total
    out = []
    while len(out) < steps:
        order = rng.permutation(samples)
        out += [order[i * batch_total:(i + 1) * batch_total] for i in range(per_epoch)]
    return np.array(out[:steps])


def shard(x: np.ndarray, y: np.ndarray, idx: np.ndarray, rank: int, mlp: Mlp):
    """Core ``rank``'s part of the global batch ``idx``: X (inputs x B) and one-hot Y
    (classes x B), the samples along the free axis."""
    mine = idx[rank * mlp.batch:(rank + 1) * mlp.batch]
    return x[mine].T, np.eye(mlp.classes, dtype=np.float32)[y[mine]].T


def accuracy(params: dict, x: np.ndarray, y: np.ndarray) -> float:
    """Test accuracy of ``params`` (a float32 forward of the bf16-rounded inputs)."""
    xb = x.astype(ml_dtypes.bfloat16).astype(np.float32)
    h = np.maximum(xb @ params["w1"] + params["b1"].T, 0)
    z = h @ params["w2"] + params["b2"].T
    return float(np.mean(np.argmax(z, axis=1) == y))


@dataclass
class TrainSetup:
    """What a run needs besides its length: the mode, learning rate, cores and seeds."""

    mode: str = "sr"
    lr: float = DEFAULT_LR
    cores: int = 4
    seed: int = 0
    mlp: Mlp = MLP
    config: dict = field(default_factory=lambda: dict(TRAIN_CONFIG))

    def __post_init__(self):
        if self.mode not in MODES:
            raise ValueError(f"rounding must be one of {', '.join(MODES)}, not {self.mode!r}")
        if isinstance(self.cores, bool) or not isinstance(self.cores, int) or self.cores < 2:
            raise ValueError(f"cores must be an integer >= 2 (a ring), not {self.cores!r}")
        if not (isinstance(self.lr, (int, float)) and 0 < self.lr < 1e3):
            raise ValueError(f"lr must be a positive number, not {self.lr!r}")

    @property
    def params_dtype(self):
        return np.float32 if self.mode == "fp32" else ml_dtypes.bfloat16

    def core_params(self) -> dict:
        return {**self.config, "ranks": self.cores}

    def cfg(self):
        return core_config(self.core_params())

    def layout(self) -> ParamLayout:
        return ParamLayout(self.mlp, self.config["n"])


class _Data:
    def __init__(self, setup: TrainSetup, steps: int):
        self.setup = setup
        self.x_train, self.y_train, self.x_test, self.y_test = digits(setup.seed)
        self.idx = batch_indices(len(self.y_train), setup.mlp.batch * setup.cores, steps,
                                 setup.seed)
        self.params = setup.layout().pack(init_params(setup.mlp, setup.seed),
                                          setup.params_dtype)

    def batches(self, rank: int, steps: range) -> list:
        s = self.setup
        return [shard(self.x_train, self.y_train, self.idx[t], rank, s.mlp) for t in steps]


def _trace(setup: TrainSetup, data: _Data, steps: range, seed: bool):
    cfg = setup.cfg()
    return [trace_steps(cfg, setup.mlp, mode=setup.mode, lr=setup.lr, params=data.params,
                        batches=data.batches(r, steps), seed=setup.seed if seed else None,
                        rank=r, ranks=setup.cores) for r in range(setup.cores)]


def _read(iss: NeuronCoreISS, t) -> np.ndarray:
    return read_tensor(iss.dram, t)


def _run_on_iss(traced) -> tuple[list[NeuronCoreISS], object]:
    isses = [NeuronCoreISS(k.cfg, dram=k.dram) for k, _ in traced]
    RingISS(isses).run([k.program for k, _ in traced])
    _check(isses)
    return isses, traced[0][1]


def rtl_steps_max(setup: TrainSetup) -> int:
    """The most steps one RTL program holds: the parameter block, the loss row and every
    step's X and Y in a core's DRAM (each tensor 64-byte aligned, as the tracer places
    them)."""
    m, n = setup.mlp, setup.config["n"]

    def aligned(nbytes: int) -> int:
        return -(-nbytes // 64) * 64

    params = aligned(n * setup.layout().words * np.dtype(setup.params_dtype).itemsize)
    x, y = (n * -(-rows // n) * m.batch * 2 for rows in (m.inputs, m.classes))  # bf16 tiles
    per_step = aligned(x) + aligned(y) + 4  # and the step's fp32 loss
    return max(0, (setup.config["dram_bytes"] - params - 64) // per_step)


def run_program_on_iss(setup: TrainSetup, steps: int):
    """The program the RTL runs for the first ``steps`` steps (every step's batch in DRAM, the
    seed set once), on the ISS: ``(the cores' ISSes, core 0's StepTensors)``."""
    return _run_on_iss(_trace(setup, _Data(setup, steps), range(steps), True))


def _check(isses) -> None:
    for r, iss in enumerate(isses):
        if iss.error != ErrorCode.OK:
            raise RuntimeError(f"core {r} stopped with {iss.error.name} at command "
                               f"{iss.error_index}: {iss.error_reason}")


def train(steps: int, setup: TrainSetup | None = None, *, on: str = "iss",
          eval_every: int = 10, progress=None, waves: bool = False) -> dict:
    """Train for ``steps`` steps on the ISS (``on="iss"``), or run those steps on the RTL
    (``"icarus"`` / ``"verilator"``) and on the ISS. Returns a dict: ``loss`` (each step's,
    from the cores), ``accuracy`` ((step, test accuracy) every ``eval_every`` steps and at the
    end), ``moved`` (each step's fraction of the weights of W1 and W2 that changed),
    ``params`` (the final w1, w2, b1, b2 of core 0, float32 lists), the setup, the ISS's
    ``seconds``; on the RTL also ``bit_exact``, ``mismatch``, ``cycles``, ``perf`` and
    ``same_as_iss_run`` (the RTL program's parameters and losses equal the per-step ISS
    run's). ``progress``: called with the number of steps done (for a bar)."""
    setup = setup or TrainSetup()
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
        raise ValueError(f"steps must be a positive integer, not {steps!r}")
    if on not in ("iss", "icarus", "verilator"):
        raise ValueError(f"on must be iss, icarus or verilator, not {on!r}")
    if on != "iss" and steps > rtl_steps_max(setup):
        raise ValueError(f"the RTL runs at most {rtl_steps_max(setup)} steps (every step's "
                         f"batch in each core's {setup.config['dram_bytes']} bytes of DRAM), "
                         f"not {steps}")
    data = _Data(setup, steps)
    layout = setup.layout()
    out = {"steps": steps, "mode": setup.mode, "lr": setup.lr, "cores": setup.cores,
           "seed": setup.seed, "on": on, "config": setup.core_params(),
           "mlp": dataclasses.asdict(setup.mlp),
           "train_samples": len(data.y_train), "test_samples": len(data.y_test)}

    # The run on the ISS, one program per step.
    t0 = time.perf_counter()
    first, rest = _trace(setup, data, range(1), True), _trace(setup, data, range(1), False)
    isses = [NeuronCoreISS(k.cfg, dram=k.dram) for k, _ in first]
    ring = RingISS(isses)
    tensors = first[0][1]
    x_addr, y_addr = tensors.x[0].addr, tensors.y[0].addr
    losses, acc, moved = [], [], []
    before = layout.unpack(data.params)
    n = setup.config["n"]
    for t in range(steps):
        for r, iss in enumerate(isses):
            xb, yb = shard(data.x_train, data.y_train, data.idx[t], r, setup.mlp)
            for addr, a in ((x_addr, xb), (y_addr, yb)):
                raw = batch_tiles(a, n).view(np.uint8).reshape(-1)
                iss.dram[addr:addr + raw.size] = raw
        ring.run([k.program for k, _ in (first if t == 0 else rest)])
        _check(isses)
        losses.append(float(_read(isses[0], tensors.loss)[0, 0]))
        p = layout.unpack(_read(isses[0], tensors.params))
        moved.append(float(np.mean(np.concatenate(
            [(p[w] != before[w]).ravel() for w in ("w1", "w2")]))))
        before = p
        if (t + 1) % eval_every == 0 or t + 1 == steps:
            acc.append((t + 1, accuracy(p, data.x_test, data.y_test)))
        if progress is not None:
            progress(t + 1)
    out["seconds"] = time.perf_counter() - t0
    final = [_read(iss, tensors.params).tobytes() for iss in isses]
    out["same_on_every_core"] = all(f == final[0] for f in final)
    out.update(loss=losses, accuracy=acc, moved=moved,
               params={k: v.tolist() for k, v in before.items()})  # core 0's, after the last step

    if on != "iss":
        traced = _trace(setup, data, range(steps), True)
        tk = TracedKernel(setup.core_params(), [k for k, _ in traced],
                          [{"params": t.params, "loss": t.loss} for _, t in traced])
        fig = run_traced_rtl(tk, on, setup.seed, waves)
        out.update(bit_exact=fig["bit_exact"], mismatch=fig.get("mismatch", ""))
        if fig["bit_exact"]:
            out.update(cycles=fig["cycles"], perf=fig["perf"])
        # The RTL program on the ISS (what the RTL ended with, when bit-exact) against the
        # per-step run: the same parameters on every core, the same losses.
        ref, t_rtl = _run_on_iss(traced)
        out["same_as_iss_run"] = all(
            _read(a, t_rtl.params).tobytes() == _read(b, tensors.params).tobytes()
            for a, b in zip(ref, isses, strict=True)) and \
            _read(ref[0], t_rtl.loss)[0].tobytes() == np.array(losses, np.float32).tobytes()
        if fig.get("waves"):
            out["waves"] = fig["waves"]
    return out
