# amaranth: UnusedElaboratable=no
"""Coverage: the functional-coverage collector (bins, crosses, merging, holes), the
testbench hooks (no-ops when off), the classifiers against the golden casts, and one real
Verilator line/toggle coverage run of a tiny design, parsed and merged."""

import json
from types import SimpleNamespace

import numpy as np
import pytest
import yaml

from golden.isa import ErrorCode, Opcode, encode
from golden.rounding import round_fp32
from sim import runner
from sim.verify import coverage as cov
from sim.verify import coverage_report as rep


def _group():
    return cov.CoverGroup("g", [cov.CoverPoint("a", ("x", "y")),
                                cov.CoverPoint("b", ("1", "2", "3"))],
                          [cov.Cross("a x b", ("a", "b"),
                                     lambda v: v["a"] == "y" and v["b"] == "3")])


def test_bins_crosses_and_holes():
    g = _group()
    assert g.cross_bins("a x b") == ["x|1", "x|2", "x|3", "y|1", "y|2"]  # y|3 excluded
    g.sample(a="x", b={"1", "2"})  # a set: each bin, each cross combination
    g.sample(a="y")  # no b: the cross is not sampled
    r = g.report()
    assert r["items"]["a"] == {"kind": "point", "hit": 2, "total": 2, "holes": []}
    assert r["items"]["b"]["holes"] == ["3"]
    assert r["items"]["a x b"]["holes"] == ["x|3", "y|1", "y|2"]
    assert (r["hit"], r["total"]) == (2 + 2 + 2, 2 + 3 + 5)
    assert not r["unknown"] and not r["illegal"]


def test_unknown_values_and_illegal_combinations_are_reported():
    g = _group()
    g.sample(a="z", b="3")
    g.sample(a="y", b="3")  # excluded combination hit: a classification bug
    r = g.report()
    assert r["unknown"] == {"a=z": 1}
    assert r["illegal"] == {"a x b:y|3": 1}
    with pytest.raises(KeyError):
        g.sample(c="x")


def test_merging_runs(tmp_path):
    saved = {k: v for k, v in cov.GROUPS.items()}
    try:
        for i, op in enumerate(("x", "y")):
            cov.GROUPS.clear()
            cov.GROUPS.update(cov.new_groups())
            cov.GROUPS["sequencer"].sample(op="BARRIER" if i else "MATMUL", prev="idle",
                                           gap="after_idle")
            path = cov.dump(tmp_path)
            assert path is not None and path.parent == tmp_path, op
        cov.GROUPS.clear()
        cov.GROUPS.update(cov.new_groups())
        assert cov.dump(tmp_path) is None  # nothing sampled: no file
    finally:
        cov.GROUPS.clear()
        cov.GROUPS.update(saved)
    groups, n = cov.merge_dir(tmp_path)
    assert n == 2
    r = groups["sequencer"].report()["items"]
    assert r["op"]["hit"] == 2 and "MATMUL" not in r["op"]["holes"]
    assert r["prev x op"]["hit"] == 2 and "idle|SET_SEED" in r["prev x op"]["holes"]
    assert groups["tensor_engine"].report()["hit"] == 0


def test_files_are_cocotb_coverage_exports_merged_by_it(tmp_path, monkeypatch):
    """Each process writes cocotb-coverage's YAML export (the design's groups only, counts per
    bin) and a JSON of the values that are no bin; merging adds the hits of every file."""
    for _ in range(2):
        groups = cov.new_groups()
        monkeypatch.setattr(cov, "GROUPS", groups)
        seq = groups["sequencer"]
        seq.sample(5, op="MATMUL", prev="idle", gap="after_idle")  # 5 observations at once
        seq.sample(op="NOP", prev="idle")  # NOP is no opcode: unknown
        seq.sample(fail_op="MATMUL", error="BAD_FIELD")  # an excluded combination: illegal
        path = cov.dump(tmp_path)
        data = yaml.safe_load(path.read_text())
        assert data["sequencer.op"]["bins:_hits"]["MATMUL"] == 5
        assert data["sequencer.prev x op"]["bins:_hits"]["('idle', 'MATMUL')"] == 5
        assert not any(k.startswith("nclite") or "~" in k for k in data)
        assert json.loads(path.with_suffix(".json").read_text())["groups"]["sequencer"] == {
            "unknown": {"op=NOP": 1}, "illegal": {"fail_op x error:MATMUL|BAD_FIELD": 1}}
    merged, n = cov.merge_dir(tmp_path)
    assert n == 2
    seq = merged["sequencer"]
    assert seq.counts()["op"]["MATMUL"] == 10 and seq.counts()["prev"]["idle"] == 12
    assert seq.counts()["prev x op"]["idle|MATMUL"] == 10
    r = seq.report()
    assert r["unknown"] == {"op=NOP": 2} and r["illegal"] == {"fail_op x error:MATMUL|BAD_FIELD": 2}
    assert r["items"]["op"]["hit"] == 1 and r["items"]["fail_op x error"]["hit"] == 0


def test_hooks_are_noops_when_off():
    assert not cov.enabled()  # the test environment does not set NCLITE_FUNC_COVERAGE_DIR
    before = {n: g.to_dict() for n, g in cov.GROUPS.items()}
    phase = SimpleNamespace()
    bad = object()  # anything: the hooks must not even look at their arguments
    cov.te_stationary(bad, bad, "bf16")
    cov.te_moving(bad, phase, bad, "bf16", True)
    cov.te_phase(phase)
    cov.te_psum(bad, bad)
    cov.sru_beats(bad, bad, bad)
    cov.core_program(bad, bad, False)
    assert not vars(phase)
    assert {n: g.to_dict() for n, g in cov.GROUPS.items()} == before
    assert cov.dump() is None


def test_hooks_sample_when_on(monkeypatch):
    monkeypatch.setattr(cov, "GROUPS", cov.new_groups())
    cov.set_enabled(True)
    try:
        prog = SimpleNamespace(cfg=SimpleNamespace(n=4, words=16))
        phase = SimpleNamespace()
        cov.te_stationary(prog, np.array([[0x0000, 0x7F80], [0x3F80, 0x7FC0]]), "bf16")
        cov.te_moving(prog, phase, np.array([[0x80], [0x38]]), "fp8_e4m3", True)
        cov.te_phase(phase)
        res = SimpleNamespace(error=ErrorCode.BAD_SHAPE, error_index=1)
        cov.core_program([encode(Opcode.BARRIER), encode(Opcode.MATMUL, fmt=0, part=0, k=1,
                                                         f=1, sbuf_addr=0, bank=0,
                                                         psum_addr=0, accumulate=0),
                          encode(Opcode.BARRIER)], res, False)
    finally:
        cov.set_enabled(False)
    te = cov.GROUPS["tensor_engine"].report()["items"]
    assert te["k"]["holes"] == ["1", "N"] and te["m"]["holes"] == ["1", "N"]  # K = M = 2 < 4
    assert te["f"]["holes"] == ["2..N", "N+1..bank-1", "bank"]
    assert te["mode"]["holes"] == ["overwrite"]
    assert set(te["s_class"]["holes"]) == {"-0", "subnormal", "max_finite", "-inf"}
    # Products pair rows: row 0 (+0, +inf) x -0, row 1 (normal, nan) x normal.
    pairs = te["products s_class x m_class"]
    assert pairs["hit"] == 4 and "+inf|-0" not in pairs["holes"]
    assert "+inf|normal" in pairs["holes"]  # never multiplied together
    seq = cov.GROUPS["sequencer"].report()["items"]
    assert seq["prev x op"]["hit"] == 2  # idle|BARRIER, BARRIER|MATMUL; the last was dropped
    assert seq["fail_op x error"]["hit"] == 1 and "MATMUL|BAD_SHAPE" not in \
        seq["fail_op x error"]["holes"]


def test_sru_classes_follow_the_golden_cast():
    rng = np.random.default_rng(3)
    x = np.concatenate([np.array([0, 0x80000000, 1, 0x3F808000, 0x7F7F8000, 0x7F800000,
                                  0xFF800000, 0x7FC00000, 0x43E00000, 0x43E80000],
                                 dtype=np.uint32),
                        rng.integers(0, 1 << 32, 2000, dtype=np.uint64).astype(np.uint32)])
    names = [cov.SRU_INPUT_CLASSES[i] for i in cov.sru_input_classes(x[:10], "bf16")]
    assert names == ["+0", "-0", "subnormal", "tie", "overflow", "+inf", "-inf", "nan",
                     "normal", "normal"]
    e4m3 = [cov.SRU_INPUT_CLASSES[i] for i in cov.sru_input_classes(x[8:10], "fp8_e4m3")]
    assert e4m3 == ["max_finite", "overflow"]
    for fmt in ("bf16", "fp8_e4m3", "fp8_e5m2", "fp16"):
        for mode in ("rne", "rtz"):
            for sat in (False, True):
                out = round_fp32(x, fmt, mode, saturate=sat)
                oc = cov._sru_outcomes(x, out, fmt)
                names = {cov.SRU_OUTCOMES[i] for i in oc.tolist()}
                combos = [{"dtype": fmt, "mode": mode, "saturate": "on" if sat else "off",
                           "outcome": n} for n in names]
                # No outcome the golden cast gives is one the cross declares impossible.
                assert not any(cov._sru_outcome_exclude(v) for v in combos), (fmt, mode, sat)
                if mode == "rtz":
                    assert "up" not in names
                ties = cov.sru_input_classes(x, fmt) == cov.SRU_INPUT_CLASSES.index("tie")
                if mode == "rne" and ties.any():
                    assert set(oc[ties].tolist()) <= {0, 1, 2, 3, 4, 5}


def test_dat_parse_merge_and_report(tmp_path):
    key = "\x01f\x02{f}\x01l\x02{l}\x01t\x02{t}\x01page\x02v_{t}/top.sub_{i}\x01o\x02x\x01h\x02top"
    src = tmp_path / "top.v"
    src.write_text("module top;\nwire a;\nendmodule\n")
    (tmp_path / "params.json").write_text(json.dumps({"params": {"n": 2}}) + "\n")
    a, b = tmp_path / "a.dat", tmp_path / "b.dat"
    a.write_text("# SystemC::Coverage-3\n"
                 f"C '{key.format(f=src, l=2, t='toggle', i=0)}' 0\n"
                 f"C '{key.format(f=src, l=2, t='toggle', i=1)}' 0\n"
                 f"C '{key.format(f=src, l=1, t='line', i=0)}' 3\n")
    b.write_text("# SystemC::Coverage-3\n"
                 f"C '{key.format(f=src, l=2, t='toggle', i=0)}' 2\n")
    points = rep.merge_dats([a, b])
    assert sorted(points.values()) == [0, 2, 3]
    code = rep.code_coverage(points)
    assert code["total"]["toggle"] == {"hit": 1, "total": 2, "percent": 50.0}
    assert code["total"]["line"]["percent"] == 100.0
    design = code["designs"]["top n=2"]
    assert list(design["modules"]) == ["sub_*"]  # instances folded
    rep.write_dat(points, tmp_path / "m.dat")
    assert rep.merge_dats([tmp_path / "m.dat"]) == points
    (ann,) = rep.annotate(points, tmp_path / "ann")
    assert ann.read_text().splitlines()[1].startswith("%000000 wire a;")


def test_verilator_coverage_run_end_to_end(tmp_path, monkeypatch):
    """A tiny design built with --coverage-line --coverage-toggle: the run writes its own
    .dat, which parses into line and toggle points of the design, some hit."""
    monkeypatch.setenv("NCLITE_COVERAGE", "1")
    monkeypatch.setenv("NCLITE_COVERAGE_DAT_DIR", str(tmp_path))
    r = runner.run("sim.tb.selftest_design:InitialisedComb", {}, "sim.tb.selftest", "verilator",
                   run_tag="coverage", quiet=True)
    (dat,) = tmp_path.glob("*.dat")
    # Its own build directory (verilator-cov, with the suite's g++ level: verilator-cov-O0).
    assert any(d.name.startswith("verilator-cov") for d in r.verilog.parent.iterdir())
    code = rep.code_coverage(rep.parse_dat(dat))
    t = code["total"]
    assert t["line"]["total"] > 0 and t["toggle"]["total"] > 0
    assert 0 < t["line"]["hit"] <= t["line"]["total"]
    assert 0 < t["toggle"]["hit"] < t["toggle"]["total"]
    assert any(label.startswith("initialised_comb") for label in code["designs"])


def test_coverage_off_keeps_the_default_build(monkeypatch):
    monkeypatch.delenv("NCLITE_COVERAGE", raising=False)
    assert not runner.coverage_enabled("verilator")
    monkeypatch.setenv("NCLITE_COVERAGE", "1")
    assert runner.coverage_enabled("verilator") and not runner.coverage_enabled("icarus")
