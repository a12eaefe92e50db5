"""``make bench``'s training section: the MLP on scikit-learn's digits trained data-parallel on
four cores (``sim.host.training``) with fp32 master weights, bf16 weights by RNE and bf16
weights by SR, at a learning rate where training works and at a small one, on the golden
ISS; and the first steps of the SR run on the RTL (Verilator), bit-exact with the ISS, for the
cycles of a training step.

:func:`bench_training` measures; :func:`render_training` writes the markdown section;
:func:`plot_training` draws ``<out>/training.png`` (the README's figure).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from sim.cli.train import ALL_MODES as MODES
from sim.cli.train import LABELS, plot_runs

__all__ = ["MODES", "TRAIN_STEPS", "TRAIN_LRS", "TRAIN_RTL_STEPS", "bench_training",
           "render_training", "plot_training", "training_failures", "summary"]

#: Steps of each run (quick: 20), the learning rates (the default, and a small one at which
#: bf16 updates fall below half an ulp of many weights), the RTL steps.
TRAIN_STEPS = 300
TRAIN_LRS = (0.5, 0.01)
TRAIN_RTL_STEPS = 2
#: The steps a run's end figures average over.
TAIL = 50


def bench_training(quick: bool = False, progress=None) -> dict:
    """Every mode at every learning rate on the ISS (the whole run, each step's loss and
    moved fraction, the test accuracy every 10 steps); the SR run's first steps on the RTL."""
    from sim.host.training import TrainSetup, train

    steps = 20 if quick else TRAIN_STEPS
    runs = []
    for lr in TRAIN_LRS:
        for mode in MODES:
            if progress:
                progress(f"training: {mode}, lr {lr}, {steps} steps on the ISS ...")
            r = train(steps, TrainSetup(mode=mode, lr=lr), eval_every=10)
            r.pop("params")
            runs.append(r)
    if progress:
        progress(f"training: the first {TRAIN_RTL_STEPS} steps on the RTL in verilator ...")
    rtl = train(TRAIN_RTL_STEPS, TrainSetup(mode="sr"), on="verilator", eval_every=1)
    rtl = {k: rtl[k] for k in ("steps", "mode", "lr", "cores", "config", "mlp", "bit_exact",
                               "mismatch", "cycles", "perf", "same_as_iss_run", "loss")
           if k in rtl}
    return {"steps": steps, "lrs": list(TRAIN_LRS), "runs": runs, "rtl": rtl}


def summary(r: dict) -> dict:
    """A run's end figures: the mean loss and the mean fraction of W1/W2 entries that changed
    over the last :data:`TAIL` steps, and the final test accuracy."""
    tail = min(TAIL, len(r["loss"]))
    return {"loss": float(np.mean(r["loss"][-tail:])), "accuracy": r["accuracy"][-1][1],
            "moved": float(np.mean(r["moved"][-tail:])), "tail": tail}


def render_training(tr: dict | None) -> list[str]:
    if not tr:
        return []
    lines = ["", "## Training on the cores", ""]
    if "error" in tr:
        return lines + [f"FAILED: {tr['error'].splitlines()[0][:200]}"]
    r0 = tr["runs"][0]
    m = r0["mlp"]
    lines += [
        f"`nclite train`: an MLP {m['inputs']} -> {m['hidden']} (relu) -> {m['classes']} on "
        f"scikit-learn's digits ({r0['train_samples']} training and {r0['test_samples']} test "
        f"images, pixels centred), mean squared error against one-hot targets, trained "
        f"data-parallel on {r0['cores']} cores ({m['batch']} samples each a step), "
        f"{tr['steps']} steps, seed {r0['seed']}, on the golden ISS: every number of each step "
        "(forward and backward GEMMs, transposes, the loss, the gradients' all-reduce, the "
        "update) computed by the cores' commands; the host feeds batches and evaluates the "
        "test accuracy. *Loss* and *moved* (the share of W1's and W2's entries that changed in "
        f"a step) are means over the last {summary(r0)['tail']} steps. Plot: "
        "[training.png](training.png).",
        "",
        "| lr | weights | loss | test accuracy | moved a step |",
        "|---:|---|---:|---:|---:|",
    ]
    for r in tr["runs"]:
        s = summary(r)
        lines.append(f"| {r['lr']} | {LABELS[r['mode']]} | {s['loss']:.4f} | "
                     f"{100 * s['accuracy']:.1f} % | {100 * s['moved']:.1f} % |")
    rtl = tr["rtl"]
    if "error" in rtl:
        lines += ["", f"RTL: FAILED: {rtl['error'].splitlines()[0][:200]}"]
    else:
        ok = rtl["bit_exact"] and rtl["same_as_iss_run"]
        cyc = max(rtl["cycles"]) if rtl["bit_exact"] else None
        lines += ["", f"On the RTL (`hdl.sim_top:RingWithDram`, {rtl['cores']} cores N = "
                  f"{rtl['config']['n']}, Verilator), the SR run's first {rtl['steps']} steps "
                  "as one program: "
                  + (f"{cyc} cycles ({cyc // rtl['steps']} a step), every byte of DRAM and "
                     "every SBUF and PSUM word of every core bit-exact with the ISS, and the "
                     "same weights and losses as the ISS run's first steps." if ok else
                     f"**NOT bit-exact**: {rtl.get('mismatch') or 'differs from the ISS run'}")]
    return lines


def plot_training(tr: dict, png) -> Path:
    """Loss and test accuracy against step, one column per learning rate."""
    groups = [[r for r in tr["runs"] if r["lr"] == lr] for lr in tr["lrs"]]
    return plot_runs(groups, png, title=f"nclite: MLP on digits, {tr['runs'][0]['cores']} cores "
                     "data-parallel, fp32 vs bf16 RNE vs bf16 SR (make bench)")


def training_failures(tr: dict | None) -> list[str]:
    if not tr:
        return []
    if "error" in tr:
        return [f"training: {tr['error'].splitlines()[0]}"]
    rtl = tr["rtl"]
    if "error" in rtl:
        return [f"training RTL: {rtl['error'].splitlines()[0]}"]
    bad = [] if rtl["bit_exact"] else ["training RTL: not bit-exact with the ISS"]
    if rtl["bit_exact"] and not rtl["same_as_iss_run"]:
        bad.append("training RTL: the program's weights differ from the ISS run's")
    bad += [f"training {r['mode']} lr {r['lr']}: the cores' weights differ"
            for r in tr["runs"] if not r["same_on_every_core"]]
    return bad
