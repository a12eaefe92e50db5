"""Lab 1's pictures, from the project's own golden model and HDL parameters.

    .venv/bin/python docs/labs/lab1-fp-pe/figures.py

writes into ``img/`` next to this file (deterministic: fixed seeds, no timestamps):

* ``bit_layouts.png`` -- the fields of fp32, bf16, fp8-e4m3 and fp8-e5m2, with bias and range
  taken from ``golden.formats``;
* ``fp8_values.png`` -- every positive finite fp8 value (``golden.formats.to_fp32``) and its
  distance to the next one: constant in the subnormal range, doubling per binade above it;
* ``mul_pipeline.png`` -- where ``hdl.fp_mul.FpMultiplier`` puts its pipeline registers for
  each ``stages`` (``registered_phases``);
* ``dot_error.png`` -- the error of contract-order dot products (``golden.fp32.dot``) against
  exact float64 sums, relative to the classic bound gamma_K * sum|w*x|.
"""

from __future__ import annotations

import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))

from golden.formats import BF16, FP8_E4M3, FP8_E5M2, FP32, to_fp32  # noqa: E402
from golden.fp32 import dot  # noqa: E402
from hdl.fp_mul import FP_MUL_MAX_CUTS, registered_phases  # noqa: E402

IMG = Path(__file__).resolve().parent / "img"
META = {"Software": None}  # no version string in the PNG: the files stay byte-identical
COLOURS = {"sign": "#e07a5f", "exponent": "#81b29a", "mantissa": "#3d85c6"}


def _save(fig, name: str) -> None:
    IMG.mkdir(exist_ok=True)
    fig.savefig(IMG / name, dpi=110, metadata=META)
    plt.close(fig)
    print(f"wrote {IMG / name}")


def bit_layouts() -> None:
    formats = [FP32, BF16, FP8_E4M3, FP8_E5M2]
    fig, ax = plt.subplots(figsize=(10, 4.8))
    cell = 0.3  # width of one bit
    for row, f in enumerate(formats):
        y = -row * 1.25
        fields = [("sign", 1), ("exponent", f.exp_bits), ("mantissa", f.man_bits)]
        x = 0.0
        bit = f.bits - 1
        for name, width in fields:
            ax.text(x, y + 0.55, str(bit), ha="left", va="bottom", fontsize=7, color="#555")
            ax.text(x + width * cell / 2, y + 0.25, name[0].upper() * (width > 0),
                    ha="center", va="center", fontsize=8, color="white", weight="bold",
                    zorder=3)
            for _ in range(width):
                ax.add_patch(plt.Rectangle((x, y), cell, 0.5, facecolor=COLOURS[name],
                                           edgecolor="white", lw=0.8))
                x += cell
                bit -= 1
        ax.text(x - cell, y + 0.55, "0", ha="left", va="bottom", fontsize=7, color="#555")
        special = ("no infinities; only S.1111.111 is NaN" if f.nan_encoding == "fn"
                   else "E all ones: inf (M = 0) or NaN (M != 0)")
        ax.text(-0.2, y + 0.25, f.name, ha="right", va="center", fontsize=11,
                family="monospace", weight="bold")
        ax.text(0, y - 0.28,
                f"1 + {f.exp_bits} + {f.man_bits} bits, bias {f.bias};  max {f.max_finite:.5g};"
                f"  min normal 2^{f.emin};  min subnormal 2^{f.emin - f.man_bits};  {special}",
                ha="left", va="center", fontsize=8.5)
    for i, (name, colour) in enumerate(COLOURS.items()):
        ax.add_patch(plt.Rectangle((i * 2.4, 1.0), 0.3, 0.3, facecolor=colour))
        ax.text(i * 2.4 + 0.4, 1.15, f"{name} ({name[0].upper()})", va="center", fontsize=9)
    ax.text(0, -4.35, "normal (E > 0, not inf/NaN):  (-1)^S * 1.M * 2^(E - bias)\n"
            "subnormal (E = 0):            (-1)^S * 0.M * 2^(1 - bias)", fontsize=9,
            family="monospace", va="top")
    ax.set_xlim(-2.4, 32 * cell + 0.5)
    ax.set_ylim(-5.0, 1.5)
    ax.axis("off")
    ax.set_title("The operand formats of the PE and its fp32 result (golden/formats.py)",
                 fontsize=11)
    fig.tight_layout()
    _save(fig, "bit_layouts.png")


def fp8_values() -> None:
    fig, axes = plt.subplots(1, 2, figsize=(10, 4), sharey=False)
    for ax, f in zip(axes, (FP8_E4M3, FP8_E5M2), strict=True):
        bits = np.arange(1 << (f.bits - 1), dtype=np.uint8)  # sign bit clear
        with np.errstate(invalid="ignore"):
            v = to_fp32(bits, f).astype(np.float64)
        v = v[np.isfinite(v)]
        count = int(np.sum(v > 0))
        gap = np.diff(v)
        v = v[:-1]
        sub = bits[: len(v)] < (1 << f.man_bits)
        ax.loglog(v[sub & (v > 0)], gap[sub & (v > 0)], "o", ms=4, color="#e07a5f",
                  label=f"subnormals (E = 0): step 2^{f.emin - f.man_bits}")
        ax.loglog(v[~sub], gap[~sub], "o", ms=3, color="#3d85c6",
                  label=f"normals: step 2^(e - {f.man_bits}) in binade 2^e")
        ax.axvline(f.min_normal, color="#999", lw=0.8, ls="--",
                   label=f"min normal 2^{f.emin}")
        ax.set_title(f"{f.name}: {count} positive finite values, max {f.max_finite:g}",
                     fontsize=10)
        ax.set_xlabel("value x")
        ax.set_ylabel("distance to the next value (ulp)")
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize=8, loc="upper left")
    fig.suptitle("fp8 is a logarithmic ruler with a linear piece at the bottom "
                 "(golden.formats.to_fp32 of every code)", fontsize=11)
    fig.tight_layout()
    _save(fig, "fp8_values.png")


def mul_pipeline() -> None:
    phases = ["unpacked", "multiplied", "product", "aligned", "result"]
    what = ["decode operands\n(OperandDecoder)", "8x8 multiply (DSP)\n+ exponent sum",
            "normalise, classify\n(overflow / subnormal)", "align: shift right,\nround + sticky",
            "RNE, pack,\nNaN / inf / 0"]
    fig, ax = plt.subplots(figsize=(10, 4.1))
    for s in range(FP_MUL_MAX_CUTS + 1):
        y = FP_MUL_MAX_CUTS - s
        ax.text(-0.3, y, f"stages={s}", ha="right", va="center", fontsize=10,
                family="monospace")
        for i, phase in enumerate(phases):
            ax.add_patch(plt.Rectangle((i * 2, y - 0.3), 1.6, 0.6, facecolor="#dde8f3",
                                       edgecolor="#3d85c6"))
            if phase in registered_phases(s):
                ax.add_patch(plt.Rectangle((i * 2 + 1.65, y - 0.38), 0.3, 0.76,
                                           facecolor="#333"))
    for i, text in enumerate(what):
        ax.text(i * 2 + 0.8, FP_MUL_MAX_CUTS + 0.55, text, ha="center", va="bottom",
                fontsize=8)
        ax.text(i * 2 + 0.8, FP_MUL_MAX_CUTS + 1.25, phases[i], ha="center", va="bottom",
                fontsize=9, family="monospace", weight="bold")
    ax.text(5 * 2 + 0.1, -0.9, "black bar = pipeline register after that phase "
            "(hdl/fp_mul.py registered_phases); the PE uses stages=5", ha="right", fontsize=8.5)
    ax.set_xlim(-2.2, 10.2)
    ax.set_ylim(-1.1, FP_MUL_MAX_CUTS + 1.9)
    ax.axis("off")
    ax.set_title("FpMultiplier: five phases, and the registers each stage count adds",
                 fontsize=11)
    fig.tight_layout()
    _save(fig, "mul_pipeline.png")


def dot_error() -> None:
    rng = np.random.default_rng(1)
    k = 64
    trials = 4000
    fig, ax = plt.subplots(figsize=(8, 4))
    u = 2.0**-24  # unit roundoff of fp32
    gamma = k * u / (1 - k * u)
    for f, colour in ((BF16, "#3d85c6"), (FP8_E4M3, "#e07a5f")):
        w64 = rng.standard_normal((trials, k))
        x64 = rng.standard_normal((trials, k))
        w = w64.astype(f.dtype).view(f.uint_dtype)
        x = x64.astype(f.dtype).view(f.uint_dtype)
        got = dot(w, f, x, f).view(np.float32).astype(np.float64)
        wv = to_fp32(w, f).astype(np.float64)
        xv = to_fp32(x, f).astype(np.float64)
        exact = np.sum(wv * xv, axis=1)  # products exact in float64; the sum nearly so
        bound = gamma * np.sum(np.abs(wv * xv), axis=1)
        ratio = np.abs(got - exact) / bound
        exact_count = int(np.sum(ratio == 0))
        ax.hist(ratio[ratio > 0], bins=np.geomspace(1e-6, 1, 61), alpha=0.6, color=colour,
                label=f"{f.name} inputs: {exact_count} of {trials} exact; "
                      f"median {np.median(ratio):.1e}, max {ratio.max():.1e}")
    ax.set_xscale("log")
    ax.set_xlabel("|fp32 contract-order dot - exact| / (gamma_K * sum|w*x|),  K = 64")
    ax.set_ylabel(f"count (of {trials})")
    ax.set_title("Rounding error of one PE column's dot product (golden.fp32.dot): "
                 "far below the worst case, often none", fontsize=10)
    ax.legend(fontsize=9)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    _save(fig, "dot_error.png")


if __name__ == "__main__":
    bit_layouts()
    fp8_values()
    mul_pipeline()
    dot_error()
