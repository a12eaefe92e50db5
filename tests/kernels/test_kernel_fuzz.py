"""Differential fuzzing of kernels (issue 21): random kernels (``kernel_fuzz``: GEMMs with
epilogues, and collectives on rings of cores) on the ISS against a plain numpy statement of what
they compute, illegal ones against the line that is wrong, and a sample on the RTL in both
simulators against the ISS, bit for bit. Every failure
names its seed and the kernel's source file."""

from __future__ import annotations

import os

import kernel_fuzz as kf
import numpy as np
import pytest

from sim.kernels import KernelError, load_kernel, run_kernel
from sim.kernels.run import DEFAULT_CONFIG


def _module(tmp_path, spec, ins, name):
    path = tmp_path / f"{name}.py"
    path.write_text(kf.source(spec))
    module = load_kernel(path)
    module.INPUTS = ins
    module.CONFIG = {**DEFAULT_CONFIG, **spec.config}  # with core=: DEFAULT_CONFIG itself
    return module, path


def _check(tmp_path, seed: int, i: int, on: str = "iss", core: dict | None = None):
    rng = np.random.default_rng([seed, i])
    spec = kf.random_spec(rng, core=core)
    ins = kf.inputs(spec, rng)
    module, path = _module(tmp_path, spec, ins, f"k{seed}_{i}")
    r = run_kernel(module, on=on)
    got = r["outputs"]["out"][0]
    if on != "iss":
        assert r["bit_exact"], f"seed {seed} kernel {i} ({path}): {r['mismatch']}"
    ok = kf.bits_equal(got, kf.meaning(spec, ins), spec.out)
    assert ok.all(), (f"seed {seed} kernel {i} ({path}, {spec}): {int((~ok).sum())} of "
                      f"{ok.size} outputs differ from numpy's, first at "
                      f"{np.argwhere(~ok)[0].tolist()}")


def test_random_kernels_mean_what_they_say(tmp_path, seed):
    """100 random kernels on the ISS (200 in ``make test-full``), each output bit-exact with
    numpy's statement (any NaN matching any); ``make test-full`` runs 10 000 more."""
    for i in range(200 if os.environ.get("NCLITE_FULL") else 100):
        _check(tmp_path, seed, i)


@pytest.mark.slow
@pytest.mark.parametrize("part", range(20))
def test_random_kernels_mean_what_they_say_long(tmp_path, seed, part):
    for i in range(500):
        _check(tmp_path, seed + 1, 1000 * part + i)


@pytest.mark.parametrize("variant", list(kf.ILLEGAL))
def test_illegal_kernels_fail_at_their_line(tmp_path, seed, variant):
    """Each illegal variant, on 20 random kernels: a KernelError at the marked line, naming
    what is wrong, before anything runs."""
    for i in range(20):
        rng = np.random.default_rng([seed, i, len(variant)])
        spec = kf.random_spec(rng, illegal=variant)
        ins = kf.inputs(spec, rng)
        module, path = _module(tmp_path, spec, ins, f"bad_{variant}_{i}")
        line = 1 + [n for n, text in enumerate(path.read_text().splitlines())
                    if text.endswith("# ILLEGAL")][0]
        with pytest.raises(KernelError) as info:
            run_kernel(module)
        err = info.value
        assert (err.file, err.line) == (str(path), line), f"seed {seed} {variant} {i}: {err}"
        assert kf.ILLEGAL[variant] in err.reason, f"seed {seed} {variant} {i}: {err}"


def test_random_kernels_on_rtl(tmp_path, simulator, seed):
    """Two on the RTL (the demo's core, so its build is shared): every memory bit-exact
    with the ISS, the output with numpy's statement."""
    core = {key: DEFAULT_CONFIG[key] for key in ("n", "sbuf_words", "psum_banks", "psum_words")}
    for i in range(2):
        _check(tmp_path, seed, 90_000 + i, on=simulator, core=core)


def _check_collective(tmp_path, seed: int, i: int, on: str = "iss", **fixed):
    rng = np.random.default_rng([seed, i, 7])
    spec = kf.random_collective(rng, **fixed)
    ins = kf.collective_inputs(spec, rng)
    path = tmp_path / f"c{seed}_{i}.py"
    path.write_text(kf.collective_source(spec))
    module = load_kernel(path)
    module.INPUTS = ins
    # A given core is the whole configuration (an RTL build the tests share).
    module.CONFIG = fixed.get("core") or {**DEFAULT_CONFIG, **spec.config}
    module.CORES = spec.ranks
    r = run_kernel(module, on=on)
    if on != "iss":
        assert r["bit_exact"], f"seed {seed} collective {i} ({path}): {r['mismatch']}"
    want, defined = kf.collective_meaning(spec, ins)
    for rank, (got, w, d) in enumerate(zip(r["outputs"]["out"], want, defined, strict=True)):
        ok = kf.bits_equal(got, w, "fp32") | ~d
        assert ok.all(), (f"seed {seed} collective {i} ({path}, {spec}): rank {rank}, "
                          f"{int((~ok).sum())} words differ from numpy's, first at "
                          f"{np.argwhere(~ok)[0].tolist()}")


def test_random_collectives_mean_what_they_say(tmp_path, seed):
    """100 random collective kernels (op, ring size, link width, bands, partitions, length)
    on a ring of ISS cores, against numpy's statement of each operation; ``make test-full``
    runs 3 000 more."""
    for i in range(100):
        _check_collective(tmp_path, seed, i)


def test_random_collectives_on_rtl(tmp_path, simulator, seed):
    """One on the RTL ring of the demo (its build shared): bit-exact with the ISS."""
    from sim.cli.demo import RING_CONFIG

    core = {key: v for key, v in RING_CONFIG.items() if key != "ranks"}
    for i in range(1):
        _check_collective(tmp_path, seed, 50_000 + i, on=simulator, core=core,
                          ranks=RING_CONFIG["ranks"])


@pytest.mark.slow
@pytest.mark.parametrize("part", range(10))
def test_random_collectives_mean_what_they_say_long(tmp_path, seed, part):
    for i in range(300):
        _check_collective(tmp_path, seed + 1, 1000 * part + i)
