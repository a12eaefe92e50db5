"""``nclite train``: an MLP trained data-parallel on a ring of cores (``sim.host.training``),
with bf16 weights updated by stochastic rounding or round-to-nearest-even, or fp32 master
weights; on the golden ISS (the whole run), or its first steps on the RTL, bit-exact.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from sim.host.training import MODES, TrainSetup, train

__all__ = ["run_train", "format_train", "plot_runs"]

#: The runs of ``--rounding all``, in the order they are shown.
ALL_MODES = ("fp32", "rne", "sr")
#: How a mode is named in the text, the plots and the bench's table.
LABELS = {"fp32": "fp32 weights", "rne": "bf16 weights, RNE", "sr": "bf16 weights, SR"}
COLORS = {"fp32": "black", "rne": "tab:red", "sr": "tab:blue"}


def run_train(*, steps: int, modes, on: str = "iss", lr: float | None = None, cores: int = 4,
              seed: int = 0, eval_every: int = 10, waves: bool = False, bar=None) -> list[dict]:
    """One run of :func:`sim.host.training.train` per mode (in ``modes``), the same data, seed
    and learning rate; ``bar``: a :class:`sim.cli.progress.Bar` to advance by steps."""
    runs = []
    for mode in modes:
        setup = TrainSetup(mode=mode, cores=cores, seed=seed,
                           **({} if lr is None else {"lr": lr}))
        if bar is not None:
            bar.status(f"{LABELS[mode]}: {steps} steps on the "
                       f"{'ISS' if on == 'iss' else f'ISS and the RTL in {on}'}")
        done = [0]

        def progress(t, done=done):
            if bar is not None:
                bar.advance(t - done[0])
            done[0] = t

        runs.append(train(steps, setup, on=on, eval_every=eval_every, progress=progress,
                          waves=waves))
    return runs


def format_train(runs: list[dict]) -> str:
    """The text ``nclite train`` prints."""
    r0 = runs[0]
    m = r0["mlp"]
    lines = [f"MLP {m['inputs']} -> {m['hidden']} (relu) -> {m['classes']} on scikit-learn's "
             f"digits ({r0['train_samples']} training, {r0['test_samples']} test images), "
             f"{r0['cores']} cores x {m['batch']} samples a step, lr {r0['lr']}, seed "
             f"{r0['seed']}"]
    for r in runs:
        acc = r["accuracy"][-1][1]
        lines.append(f"  {LABELS[r['mode']]:<18}: {r['steps']} steps, loss {r['loss'][0]:.4f} "
                     f"-> {r['loss'][-1]:.4f}, test accuracy {100 * acc:.1f} %, weights "
                     f"moved {100 * np.mean(r['moved']):.1f} % a step; the same on every "
                     f"core: {'yes' if r['same_on_every_core'] else 'NO'}")
        if "bit_exact" in r:
            if r["bit_exact"]:
                c = max(r["cycles"]) if isinstance(r["cycles"], list) else r["cycles"]
                lines.append(f"  {'':<18}  RTL in {r['on']}: bit-exact with the ISS in DRAM, "
                             f"SBUF and PSUM of every core; {c} cycles; the same weights and "
                             f"losses as the ISS run: "
                             f"{'yes' if r['same_as_iss_run'] else 'NO'}")
            else:
                lines.append(f"  {'':<18}  RTL in {r['on']}: MISMATCH: {r['mismatch']}")
    if "plot" in r0:
        lines.append(f"  plot              : {r0['plot']}")
    return "\n".join(lines)


def plot_runs(groups: list[list[dict]], png, *, title: str | None = None) -> Path:
    """Loss (each step's, from the cores; a moving mean of 10 steps) and test accuracy
    against step, one column per group of runs (one learning rate), one line per mode."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    png = Path(png)
    png.parent.mkdir(parents=True, exist_ok=True)
    fig, axes = plt.subplots(2, len(groups), figsize=(5.2 * len(groups), 6.4), dpi=110,
                             squeeze=False, sharex="col")
    for col, runs in enumerate(groups):
        for r in runs:
            loss = np.array(r["loss"])
            w = min(10, len(loss))
            smooth = np.convolve(loss, np.ones(w) / w, mode="valid")
            fp32 = r["mode"] == "fp32"  # drawn wide and underneath: SR runs on top of it
            kw = {"color": COLORS[r["mode"]], "label": LABELS[r["mode"]],
                  "linewidth": 3.0 if fp32 else 1.4, "alpha": 0.45 if fp32 else 1.0,
                  "zorder": 1 if fp32 else 2}
            axes[0, col].plot(np.arange(w, len(loss) + 1), smooth, **kw)
            steps, acc = zip(*r["accuracy"], strict=True)
            axes[1, col].plot(steps, 100 * np.array(acc), marker=".", **kw)
        axes[0, col].set_title(f"lr = {runs[0]['lr']}")
        axes[0, col].set_ylabel("training loss (MSE, mean of 10 steps)")
        axes[1, col].set_ylabel("test accuracy (%)")
        axes[1, col].set_xlabel("step")
        for ax in axes[:, col]:
            ax.grid(alpha=0.3)
        axes[1, col].legend(loc="lower right")
    r0 = groups[0][0]
    fig.suptitle(title or f"nclite: MLP on digits, {r0['cores']} cores data-parallel "
                          f"(seed {r0['seed']})")
    fig.tight_layout()
    fig.savefig(png)
    plt.close(fig)
    return png


def modes_of(rounding: str) -> tuple[str, ...]:
    """``--rounding``'s modes: one of :data:`MODES`, or ``all``."""
    if rounding == "all":
        return ALL_MODES
    if rounding not in MODES:
        raise ValueError(f"rounding must be one of {', '.join(MODES)} or all, not {rounding!r}")
    return (rounding,)
