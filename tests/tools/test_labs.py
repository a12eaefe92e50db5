"""The labs (docs/labs/): definitions, markers, scratch copies, and checks that can fail.

The reference solutions are the project's own code, so the labs' `check` tests run (and pass)
in `make test` like any other; here each lab is started in a scratch copy and its `fast` checks
must FAIL there with the stubs in place -- an exercise whose check passes untouched checks
nothing.
"""

import json
import re
import subprocess
import sys

import pytest
from click.testing import CliRunner

from hdl.sru import SRU_DEFAULT_STAGES
from sim.cli import main
from sim.runner import REPO_ROOT
from sim.tools import labs

LABS = labs.labs()


def test_six_labs():
    assert sorted(LABS) == [1, 2, 3, 4, 5, 6], {n: lab.title for n, lab in LABS.items()}
    for lab in LABS.values():
        text = (REPO_ROOT / lab.path / "README.md").read_text()
        for section in ("Goals", "Background", "Tasks", "Questions", "Exercise"):
            assert f"## {section}" in text or f"## {section.lower()}" in text, (lab.path, section)
        assert f"nclite lab start {lab.number}" in text and f"make lab{lab.number}-check" in text
        assert lab.fast, f"lab {lab.number} has no fast check to prove its stub fails"


@pytest.mark.parametrize("number", sorted(LABS))
def test_markers_and_checks_exist(number):
    lab = LABS[number]
    for ex, (begin, end) in zip(lab.exercises, lab.markers, strict=True):
        b, e, _ = labs.find_region((REPO_ROOT / ex.file).read_text(), begin, end, ex.file)
        assert e - b > 1, f"{ex.file}: the region {ex.region} is empty in the main tree"
        assert (REPO_ROOT / lab.path / ex.stub).is_file()
    # Every check exists and is part of `make test` (not marked slow).
    out = subprocess.run(
        [*labs.check_args(number, REPO_ROOT, jobs="0"), "--collect-only", "-m", "not slow"],
        cwd=REPO_ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    collected = [line for line in out.stdout.splitlines() if "::" in line]
    for test in lab.check:
        assert any(line.startswith(test.split(" ")[0]) for line in collected), test


def test_lab2_copy_has_no_save_file_of_the_pe_delays(tmp_path):
    """The GTKWave save file names each PE's sum delay (meta_d<i>): the skew as numbers."""
    assert "meta_d" in (REPO_ROOT / "docs/waves/tensor_engine.gtkw").read_text()
    labs.start(2, tmp_path / "lab2")
    assert "meta_d" not in (tmp_path / "lab2/docs/waves/tensor_engine.gtkw").read_text()


@pytest.mark.parametrize("hide", ['region = "r"\ntext = "t"', 'text = "t"\nwhole = true',
                                  'by = "b"', 'whole = false'])
def test_a_hide_names_one_thing(hide, tmp_path):
    path = tmp_path / "docs/labs/lab9-x"
    path.mkdir(parents=True)
    (path / "lab.toml").write_text(
        'title = "x"\ncheck = ["t.py"]\n[[exercise]]\nfile = "f.py"\nregion = "r"\n'
        f'stub = "s.py"\n[[hide]]\nfile = "f.py"\n{hide}\n')
    with pytest.raises(labs.LabError, match="names a `region`, a `text` or `whole = true`"):
        labs.labs(tmp_path)


@pytest.mark.parametrize("number", sorted(LABS))
def test_stub_fails_in_scratch_copy(number, tmp_path):
    lab = LABS[number]
    dest = tmp_path / f"lab{number}"
    r = labs.start(number, dest)
    assert r["dir"] == str(dest.resolve())
    assert (dest / ".venv").is_symlink() or not (REPO_ROOT / ".venv").exists()
    expected = {ex.file: (REPO_ROOT / ex.file).read_text() for ex in lab.exercises}
    for ex, (begin, end) in zip(lab.exercises, lab.markers, strict=True):
        copy = (dest / ex.file).read_text()
        assert copy != (REPO_ROOT / ex.file).read_text(), f"{ex.file}: the stub changed nothing"
        b, e, _ = labs.find_region(copy, begin, end, ex.file)
        stub = (REPO_ROOT / lab.path / ex.stub).read_text().strip().splitlines()
        assert [line.strip() for line in copy.splitlines()[b + 1:e]] == [
            line.strip() for line in stub]
        expected[ex.file] = labs.stub_region(expected[ex.file], lab, ex)
    for hide in lab.hides:  # what spells the answer out is left out too (once each)
        text = expected.get(hide.file, (REPO_ROOT / hide.file).read_text())
        expected[hide.file] = labs.hide_text(text, lab, hide)
        if hide.text is not None:
            assert hide.text not in (dest / hide.file).read_text(), hide
        if hide.whole:
            assert (REPO_ROOT / hide.file).read_text() not in hide.by, hide
    # Outside the regions every file is the reference's (lab.toml less its [[hide]] tables).
    for file, text in expected.items():
        assert (dest / file).read_text() == text, file
    toml = (dest / lab.path / "lab.toml").read_text()
    assert toml == labs.without_hides((REPO_ROOT / lab.path / "lab.toml").read_text())
    # No hidden text anywhere in the copy (lab.toml quoted them all once).
    hidden = [h.text for h in lab.hides if h.text is not None]
    for rel in labs._tracked_files(dest) if hidden else ():
        try:
            content = (dest / rel).read_text()
        except (UnicodeDecodeError, OSError):
            continue
        for text in hidden:
            assert text not in content, (rel, text[:60])
    # The main tree still holds the reference; untouched files are copied as they are.
    assert (dest / "golden" / "fp32.py").read_text() == (REPO_ROOT / "golden/fp32.py").read_text()
    proc = subprocess.run(labs.check_args(number, dest, fast=True, jobs="0"), cwd=dest,
                          capture_output=True, text=True, timeout=600)
    # pytest's exit status 1: tests ran and failed (2 would be a collection error, 5 no tests).
    assert proc.returncode == 1, (f"lab {number}: exit status {proc.returncode} with the stub:\n"
                                  + (proc.stdout + proc.stderr)[-3000:])


def test_start_refuses_to_overwrite_or_pollute(tmp_path):
    dest = tmp_path / "lab1"
    labs.start(1, dest)
    (dest / "hdl" / "mine.py").write_text("# a student's file\n")
    with pytest.raises(labs.LabError, match="exists"):
        labs.start(1, dest)
    labs.start(1, dest, force=True)
    assert not (dest / "hdl" / "mine.py").exists()
    # --force deletes only a lab copy: never the main tree, what holds it, or any other dir.
    for bad in (REPO_ROOT / "hdl" / "lab1", REPO_ROOT, REPO_ROOT.parent):
        with pytest.raises(labs.LabError, match="outside the main tree"):
            labs.start(1, bad, force=True)
    other = tmp_path / "course"
    other.mkdir()
    (other / "notes.txt").write_text("keep me")
    with pytest.raises(labs.LabError, match="not a lab copy"):
        labs.start(1, other, force=True)
    assert (other / "notes.txt").read_text() == "keep me"
    with pytest.raises(labs.LabError, match="no lab 99"):
        labs.start(99, tmp_path / "x")


def test_copy_is_a_git_repository_with_the_stub_committed(tmp_path):
    import shutil

    if shutil.which("git") is None:
        pytest.fail("git is needed (the copy is made a repository for `git diff`)")
    dest = tmp_path / "lab3"
    labs.start(3, dest)
    status = subprocess.run(["git", "status", "--porcelain"], cwd=dest, capture_output=True,
                            text=True, check=True).stdout
    assert status == "", status  # .venv (a symlink) and everything else accounted for
    assert (dest / "bench" / "results.json").is_file()


def test_reference_passes_in_a_copy_through_make(tmp_path):
    """Control: a copy without stubs passes its fast checks, run the student's way
    (`make lab<N>-check` in the copy, with the main tree's .venv), so a failure with the stubs
    means the stubs, not an incomplete copy."""
    dest = tmp_path / "lab2"
    labs.start(2, dest, regions=())
    proc = subprocess.run(["make", "lab2-check", "LAB_ARGS=--fast", "JOBS=0"], cwd=dest,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    assert "every fast check passes" in proc.stdout


@pytest.mark.parametrize("number,region", [(n, e.region) for n, lab in sorted(LABS.items())
                                           if len(lab.exercises) > 1 for e in lab.exercises])
def test_each_stub_alone_fails(number, region, tmp_path):
    dest = tmp_path / f"lab{number}"
    labs.start(number, dest, regions=(region,))
    proc = subprocess.run(labs.check_args(number, dest, fast=True, jobs="0"), cwd=dest,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 1, (f"lab {number}, only `{region}` stubbed: exit status "
                                  f"{proc.returncode}\n" + (proc.stdout + proc.stderr)[-3000:])


def test_cli(tmp_path):
    r = CliRunner().invoke(main, ["lab", "list", "--json"])
    assert r.exit_code == 0, r.output
    assert [lab["number"] for lab in json.loads(r.output)] == sorted(LABS)
    r = CliRunner().invoke(main, ["lab", "start", "2", "--dir", str(tmp_path / "l2"), "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)["check"].endswith("make lab2-check")
    r = CliRunner().invoke(main, ["lab", "check", "1", "--dir", str(tmp_path)])
    assert r.exit_code == 1 and "is not an nclite tree" in r.output


def test_nclite_in_a_copy_runs_the_copys_code(tmp_path):
    """`nclite` is installed from the main tree; inside a lab copy it must run the student's
    code: with lab 2's stub the tensor engine cannot elaborate, so gemm fails in one line."""
    dest = tmp_path / "lab2"
    labs.start(2, dest)
    nclite = dest / ".venv" / "bin" / "nclite"
    if not nclite.exists():
        pytest.fail(f"{nclite} missing: the copy's .venv link is broken")
    args = [str(nclite), "gemm", "--array", "2", "--m", "2", "--k", "2", "--n", "2",
            "--sim", "icarus"]
    proc = subprocess.run(args, cwd=dest / "docs", capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    # One line (no "created but never used" warning per half-built component), saying where
    # the lab's tasks run instead.
    assert proc.stderr.count("\n") == 1, proc.stderr
    assert proc.stderr.startswith("nclite: error: lab 2: ") and "Traceback" not in proc.stderr
    assert "lab 2's scratch copy" in proc.stderr and f"main tree ({REPO_ROOT.resolve()})" in (
        proc.stderr), proc.stderr
    # Any other Python program of the copy that reaches the stub: the copy's hdl/ installs an
    # excepthook that prints the same line (no traceback, no warnings).
    code = ("from amaranth.back import verilog; from hdl.systolic import SystolicArray; "
            "verilog.convert(SystolicArray(n=2))")
    proc = subprocess.run([str(dest / ".venv" / "bin" / "python"), "-c", code], cwd=dest,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1 and proc.stderr.count("\n") == 1, proc.stderr
    assert proc.stderr.startswith("error: lab 2: ") and "lab 2's scratch copy" in proc.stderr


def test_lab1_explore_in_a_copy_says_not_built_quietly(tmp_path):
    """Lab 1's explorer, run in the copy before the exercise is written, prints the golden
    product and "not built yet" for the RTL, and no "created but never used" warnings."""
    dest = tmp_path / "lab1"
    labs.start(1, dest)
    proc = subprocess.run([str(dest / ".venv" / "bin" / "python"),
                           "docs/labs/lab1-fp-pe/explore.py", "mul", "bf16", "0x3f80", "bf16",
                           "0x4000"], cwd=dest, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "RTL FpMultiplier  : not built yet (lab 1: " in proc.stdout, proc.stdout
    assert proc.stderr == "", proc.stderr


@pytest.mark.parametrize("number", sorted(LABS))
def test_each_task_says_where_it_runs(number):
    """Every task of a lab's text says which tree it runs in, and a stub that raises raises the
    NotImplementedError("lab N: ...") that commands in a copy turn into that one line."""
    lab = LABS[number]
    text = (REPO_ROOT / lab.path / "README.md").read_text()
    tasks = text[text.index("## Tasks"):text.index("## Questions")]
    heads = re.findall(r"^\*\*\d+\. [^*]+\*\*(.{0,16})", tasks, flags=re.M)
    assert heads, f"lab {number}: no numbered tasks"
    for tail in heads:
        assert tail.startswith((" *(main tree)*", " *(your copy)*")), (number, tail)
    for ex in lab.exercises:  # (a stub may instead be a placeholder that runs: lab 5's cuts)
        stub = (REPO_ROOT / lab.path / ex.stub).read_text()
        assert "NotImplementedError" not in stub or re.search(
            rf'raise NotImplementedError\(\s*"lab {number}: ', stub), ex.stub


def test_failure_summary_is_short(tmp_path):
    """A lab check's failures, summed up from pytest's junit report: one entry per kind of
    failure (numbers aside) with its whole message cut to a few lines, the seed, a rerun."""
    case = ('<testcase classname="tests.hdl.test_x" name="test_a[{p}]"><failure message="cut">'
            "E   Failed: seed=1 n={p}: 5/5 sums differ\n      likely: every column late\n"
            "      tile 0: got 0x0, want 0x1\ntests/hdl/test_x.py:9: Failed</failure></testcase>")
    junit = tmp_path / "r.xml"
    # Same first line, another diagnosis: a kind of its own.
    other = case.replace("test_a[{p}]", "test_d").replace("every column late", "column 0: +1")
    junit.write_text('<testsuites><testsuite>' + case.format(p=1) + case.format(p=2)
                     + other.format(p=3)
                     + '<testcase classname="tests.hdl.test_x" name="test_b" />'
                     + '<testcase classname="tests.hdl.test_x" name="test_c"><error message='
                     '"boom">E   RuntimeError: boom</error></testcase></testsuite></testsuites>')
    out = labs.failure_summary(junit, 2)
    assert out[0] == "lab 2: 4 of 5 checks fail (seed 1)"
    assert out[1:5] == ["  tests/hdl/test_x.py::test_a[1] (and 1 more like it):",
                        "    Failed: seed=1 n=1: 5/5 sums differ",
                        "      likely: every column late", "      tile 0: got 0x0, want 0x1"]
    assert "  tests/hdl/test_x.py::test_c:" in out and "    RuntimeError: boom" in out
    assert "  tests/hdl/test_x.py::test_d:" in out and "      likely: column 0: +1" in out
    assert out[-2] == "rerun one   : python -m pytest -q 'tests/hdl/test_x.py::test_a[1]'"
    assert "nclite lab check 2 -v" in out[-1]
    junit.write_text('<testsuites><testsuite><testcase classname="a" name="b" /></testsuite>'
                     '</testsuites>')
    assert labs.failure_summary(junit, 2) == []


def test_failure_summary_leaves_out_pytests_operand_lines(tmp_path):
    """pytest's explanation of an assert's operands (``+  where ...``) stays for ``-v``."""
    junit = tmp_path / "r.xml"
    junit.write_text(
        '<testsuites><testsuite><testcase classname="tests.hdl.test_x" name="test_a"><failure '
        'message="m">E   AssertionError: (16, 8, 32): stationary tiles reloaded\n'
        "E   assert 16 == 8\n"
        "E    +  where 16 = &lt;built-in method count of list object at 0x7fb6&gt;(3)\n"
        "E    +    where &lt;built-in method count&gt; = [1, 1].count\n"
        "E    +  and   8 = tiles\n"
        "tests/hdl/test_x.py:9: AssertionError</failure></testcase></testsuite></testsuites>")
    out = labs.failure_summary(junit, 6)
    assert out[1:4] == ["  tests/hdl/test_x.py::test_a:",
                        "    AssertionError: (16, 8, 32): stationary tiles reloaded",
                        "    assert 16 == 8"], out
    assert not any("where" in line or "+  and" in line for line in out), out


def test_failure_summary_names_a_test_in_a_class(tmp_path):
    """junit's classname of a test in a class holds the class after the module: the rerun
    command gets pytest's node id, module path then class (not the class as a file)."""
    (tmp_path / "tests" / "hdl").mkdir(parents=True)
    (tmp_path / "tests" / "hdl" / "test_x.py").write_text("")
    junit = tmp_path / "r.xml"
    junit.write_text('<testsuites><testsuite><testcase classname="tests.hdl.test_x.TestArray" '
                     'name="test_a"><failure message="m">E   AssertionError: no</failure>'
                     '</testcase></testsuite></testsuites>')
    out = labs.failure_summary(junit, 2, tree=tmp_path)
    assert "  tests/hdl/test_x.py::TestArray::test_a:" in out, out
    assert out[-2] == "rerun one   : python -m pytest -q 'tests/hdl/test_x.py::TestArray::test_a'"


def test_lab_check_output_has_no_xdist_start_up_lines(capfd):
    from sim.cli.app import _run_filtered

    parts = ['bringing up ', 'nodes...\n', 'bringing up nodes...\n', '..F', '\nbring', 'x\n']
    code = ("import sys; [sys.stdout.write(s) or sys.stdout.flush() for s in "
            f"[{', '.join(repr(p) for p in parts)}]]")
    assert _run_filtered([sys.executable, "-c", code], REPO_ROOT) == 0
    assert capfd.readouterr().out == "..F\nbringx\n"


def test_lab_check_output_keeps_a_character_split_between_reads(capfd):
    """A UTF-8 character whose bytes arrive in two reads comes out whole (each read was
    decoded on its own before, which printed two replacement characters)."""
    from sim.cli.app import _run_filtered

    code = ("import sys, time; b = '× ok\\n'.encode(); out = sys.stdout.buffer; "
            "out.write(b[:1]); out.flush(); time.sleep(0.2); out.write(b[1:]); out.flush()")
    assert _run_filtered([sys.executable, "-c", code], REPO_ROOT) == 0
    assert capfd.readouterr().out == "× ok\n"


def test_lab5_quotes_the_current_report():
    """Lab 5's text quotes synth/report.json (areas, Fmax, paths, the fit): when `make
    synth-report` changes the report, this names each figure the text has to follow (and
    docs/labs/lab5-synthesis-timing/figures.py redraws the pictures)."""
    report = json.loads((REPO_ROOT / "synth" / "report.json").read_text())
    by = {(r["label"], r["device"]): r for r in report["results"]}
    pe = "PE mul_stages=5 add_stages=6"
    sru = f"SRU lane (all targets, {SRU_DEFAULT_STAGES} stages)"

    def fmax(label, device="ecp5-85f"):
        return by[label, device]["timing"]["fmax_mhz"]

    def luts(label, device="ecp5-85f"):
        return by[label, device]["area"]["luts"]

    board = report["boards"]["ulx3s-85f"]
    path = board["critical_path"]
    fit = report["scaling"]
    te_paths = by["TensorEngine N=2, all formats", "ecp5-85f"]["timing"]["critical_path"]
    pe_path = by[pe, "ecp5-85f"]["timing"]["critical_path"]
    quoted = [
        f"{luts(pe)} LUTs + 1 DSP, **{fmax(pe):.1f} MHz**",
        f"{luts(pe, 'ecp5-25f')} LUTs, {fmax(pe, 'ecp5-25f'):.1f} MHz",
        f"{luts(pe, 'ice40-up5k')} LUTs + 1 DSP, **{fmax(pe, 'ice40-up5k'):.1f} MHz**",
        f"{fmax(pe):.1f} MHz alone, {fmax('PEColumn of 4 rows (default stages)'):.1f} MHz in a "
        "column of four",
        f"{round(fit['coefficient'])} · N^{fit['exponent']:.2f}",
        f"{round(luts('TensorEngine N=8, all formats') / 64)} LUTs per MAC at N = 8",
        f"{round(luts('NeuronCore N=2 sbuf 256 words psum 4x16') / 4)} LUTs per MAC at\nN = 2, "
        f"{round(luts('NeuronCore N=4 sbuf 256 words psum 4x16') / 16)} at N = 4",
        f"{path['logic_levels']} levels, {min(board['fmax_mhz'].values()):.2f} MHz",
        "N = 2 needs {:.0f} % of its LUTs".format(
            100 * luts("NeuronCore N=2 sbuf 256 words psum 4x16", "ice40-up5k")
            / report["devices"]["ice40-up5k"]["luts"]),
        "UP5K PE ({} logic levels) take longer than the SRU\n   lane on the 85F ({} levels)".format(
            *(by[k]["timing"]["critical_path"]["logic_levels"]
              for k in ((pe, "ice40-up5k"), (sru, "ecp5-85f")))),
        "({:.0f} % of\nthe PE's".format(100 * pe_path["routing_ns"] / pe_path["delay_ns"]),
        f"`{path['from'].removeprefix('top.')} ->",
        "`{} -> {}`".format(*(te_paths[end].removeprefix("design.").split("_TRELLIS")[0]
                              for end in ("from", "to"))),
    ]
    text = (REPO_ROOT / "docs/labs/lab5-synthesis-timing/README.md").read_text()
    stale = [q for q in quoted if q not in text]
    assert not stale, f"lab 5's text no longer quotes synth/report.json: {stale}"
