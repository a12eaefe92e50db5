"""`make docs-check`: every command shown in README.md and docs/ (the labs too) is run.

A command the docs show either runs here and must exit 0, or is one of the few reviewed
exceptions of sim/tools/docs_check.py's NOT_RUN (the suite itself, hours of synthesis, a board, GUI
viewers) and is checked statically: nclite's options parse, make's targets exist.
"""

import os

import pytest

from sim.tools import docs_check as dc

COMMANDS = dc.all_commands()
#: make test's budget (tests/conftest.py): the training runs, the syntheses and the tour's
#: largest runs the docs show (15 to 45 s each, most of it a model build no other test of make
#: test needs) run in make test-full and make docs-check only, and so do the commands that show
#: no output (make test checks that they parse).
FULL_ONLY_COMMANDS = ("nclite train ", "nclite synth component ", "WAVES=1 ",
                      "nclite allreduce --ranks 4 --n 16384 ",
                      "nclite gemm --array 4 --m 8 --k 64 --n 64 --sparsity ")
FULL = bool(os.environ.get("NCLITE_FULL"))


def test_docs_show_commands():
    files = {c.file for c in COMMANDS}
    assert "README.md" in files, "README.md shows no command"
    assert len(COMMANDS) >= 10, [c.id for c in COMMANDS]


def test_extractor_reads_blocks_as_documented(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "README.md").write_text(
        "text\n```sh\n# a comment\nnclite gemm --m 2 \\\n  --k 3   # trailing comment\n"
        "make demo\n```\n```console\n$ nclite doctor\noutput line\n```\n"
        "```text\n$ nclite lab list\nan output line\n```\n```python\nprint('#')\n$ x\n```\n")
    got = [(c.line, c.text, c.output) for c in dc.all_commands(tmp_path)]
    assert got == [(4, "nclite gemm --m 2 --k 3", ()), (6, "make demo", ()),
                   (9, "nclite doctor", ("output line",)),
                   (13, "nclite lab list", ("an output line",))]


def test_shown_output_is_compared(tmp_path):
    good = dc.DocCommand("README.md", 1, "echo one; echo two", ("one", "two"))
    dc.run_command(good)
    with pytest.raises(AssertionError, match="not what the command prints"):
        dc.run_command(dc.DocCommand("README.md", 1, "echo one; echo three", ("one", "two")))
    # Volatile lines (wall-clock speed) are not compared; blank lines neither.
    dc.run_command(dc.DocCommand("README.md", 1, "echo one; echo '  sim speed : 9 per s'",
                                 ("one", "", "  sim speed : 1 per s")))


def test_synthesis_figures_are_compared_with_the_reports_tools(tmp_path, monkeypatch):
    """`area:` / `Fmax:` / `critical path:` lines are compared where the installed flow is the
    one synth/report.json records (the docs show its figures), ignored with other versions."""
    real = dc.synth_figures_compared
    shown = ("  area: 776 LUTs", "  Fmax: 10.56 MHz")
    cmd = dc.DocCommand("README.md", 1, "echo '  area: 818 LUTs'; echo '  Fmax: 18.25 MHz'",
                        shown)
    monkeypatch.setattr(dc, "synth_figures_compared", lambda: True)
    with pytest.raises(AssertionError, match="818 LUTs"):
        dc.run_command(cmd)
    monkeypatch.setattr(dc, "synth_figures_compared", lambda: False)
    dc.run_command(cmd)
    # The check itself: the recorded packages against the installed ones.
    (tmp_path / "synth").mkdir()
    (tmp_path / "synth" / "report.json").write_text('{"tools": {"amaranth": "0.0.0"}}')
    assert real.__wrapped__(tmp_path) is False


def test_update_writes_what_the_commands_print(tmp_path):
    """``python -m sim.tools.docs_check --update FILE``: each differing compared line of a
    shown output becomes the printed one; blank, volatile and stderr lines stay; an output
    with another number of lines is left for a person (and counted)."""
    (tmp_path / "docs").mkdir()
    doc = tmp_path / "docs" / "x.md"
    doc.write_text("Text.\n\n```console\n$ echo one; echo 'two 3'\none\n\ntwo 2\n"
                   "nclite: waveform written to w.fst\n$ echo a \\\n  b\na c\n"
                   "$ echo p; echo q\np\n```\n")
    assert dc.update_file(doc, tmp_path, progress=lambda _: None) == 1
    assert doc.read_text() == ("Text.\n\n```console\n$ echo one; echo 'two 3'\none\n\ntwo 3\n"
                               "nclite: waveform written to w.fst\n$ echo a \\\n  b\na b\n"
                               "$ echo p; echo q\np\n```\n")
    assert dc.updated_output(["x", "  sim speed : 1"], ["y", "  sim speed : 2"]) == [
        "y", "  sim speed : 1"]


def test_static_check_catches_rot():
    bad = dc.DocCommand("README.md", 1, "nclite gemm --no-such-option")
    with pytest.raises(Exception, match="no-such-option"):
        dc.parse_check(bad)
    with pytest.raises(AssertionError, match="make -n"):
        dc.parse_check(dc.DocCommand("README.md", 1, "make no-such-target"))
    with pytest.raises(AssertionError, match="exit status"):
        dc.run_command(dc.DocCommand("README.md", 1, "nclite gemm --m 0"))
    # pytest on the suite's files is not run again, but its files and tests must exist.
    suite = dc.DocCommand("README.md", 1, "python -m pytest -q tests/hdl/test_pe_rtl.py")
    assert dc.not_run_reason(suite) and not dc.not_run_reason(
        dc.DocCommand("README.md", 1, "WAVES=1 python -m pytest -q tests/hdl/test_pe_rtl.py"))
    for text in ("python -m pytest tests/hdl/test_pe_rtl.py && nclite doctor",
                 "python -m pytest -m slow tests/hdl/test_pe_rtl.py"):
        assert not dc.not_run_reason(dc.DocCommand("README.md", 1, text)), text
    for text, msg in (("python -m pytest tests/hdl/no_such.py", "no test file"),
                      ("python -m pytest tests/hdl/test_pe_rtl.py::test_no_such", "has no")):
        with pytest.raises(AssertionError, match=msg):
            dc.parse_check(dc.DocCommand("README.md", 1, text))


@pytest.mark.parametrize("cmd", [
    pytest.param(c, marks=[pytest.mark.slow] * c.text.startswith(FULL_ONLY_COMMANDS))
    for c in COMMANDS], ids=[f"{c.file}:{c.line}" for c in COMMANDS])
def test_doc_command(cmd):
    """Run the command as a reader would (from the repository root), or check it statically."""
    reason = dc.not_run_reason(cmd) or (None if FULL or cmd.output else
                                        "shows no output: run by make test-full, docs-check")
    if reason:
        dc.parse_check(cmd)
        print(f"not run ({reason}); parsed: {cmd.text}")
    else:
        dc.run_command(cmd)


INLINE = dc.inline_commands()


@pytest.mark.parametrize("cmd", INLINE, ids=[f"{c.file}:{c.line}:{c.text}" for c in INLINE])
def test_inline_command_parses(cmd):
    """`nclite ...` / `make ...` in tables and prose: every option shown exists."""
    dc.parse_check(cmd, prose=True)


def test_usage_variants():
    assert dc.usage_variants("nclite demo [--only mlp\\|ring] [--json]") == [
        "nclite demo", "nclite demo --only mlp", "nclite demo --only ring", "nclite demo --json"]


def _python_blocks(path):
    blocks, cur = [], None
    for line in path.read_text().splitlines():
        if cur is None and line.strip().startswith("```python"):
            cur = []
        elif cur is not None and line.strip().startswith("```"):
            blocks.append("\n".join(cur))
            cur = None
        elif cur is not None:
            cur.append(line)
    return blocks


def test_readme_python_runs():
    """The README's Python examples run: the components are built with the parameters shown
    (their parameter checks run in the constructors)."""
    from amaranth.lib.wiring import Component

    blocks = _python_blocks(dc.REPO_ROOT / "README.md")
    assert blocks
    for code in blocks:
        scope = {}
        exec(compile(code, "README.md", "exec"), scope)  # noqa: S102 - our own README
        assert any(isinstance(obj, Component) for obj in scope.values()), code


def test_contract_citations_resolve():
    """Every "docs/contract.md §n" in the code names a section of docs/contract.md, and a quoted
    name after it (§4 "Randomness") is in that section; nothing cites the planning repository's
    ARCHITECTURE.md, which is not in this repository."""
    import re

    root = dc.REPO_ROOT
    parts = re.split(r"^## §(\d+)\. ", (root / "docs" / "contract.md").read_text(), flags=re.M)
    sections = dict(zip(parts[1::2], parts[2::2], strict=True))
    assert list(sections) == [str(i) for i in range(1, 8)], list(sections)
    cite = re.compile(r'docs/contract\.md((?:[\s,(]*§\d+(?:[\s,(]*"[^"\n]+")?)+)')
    found = []
    for path in sorted(p for d in ("hdl", "golden", "sim", "synth", "tests")
                       for p in (root / d).rglob("*.py")):
        text = path.read_text()
        where = path.relative_to(root)
        assert "ARCHITECTURE.md" not in text or path.name == "test_docs.py", where
        for refs in cite.findall(text):
            for num, name in re.findall(r'§(\d+)(?:[\s,(]*"([^"\n]+)")?', refs):
                assert num in sections, f"{where}: docs/contract.md has no §{num}"
                assert name in sections[num], f'{where}: §{num} has no "{name}"'
                found.append((where, num, name))
    assert len(found) >= 20, found


def test_block_index_names_every_block():
    """docs/architecture.md's "Where each block lives": every path in it exists, every module of
    hdl/ has a row, and each row's paths sit in the columns' directories."""
    import re

    root = dc.REPO_ROOT
    text = (root / "docs" / "architecture.md").read_text()
    section = text.split("## Where each block lives", 1)[1].split("\n## ", 1)[0]
    rows = [line.split("|")[1:-1] for line in section.splitlines()
            if line.startswith("| ") and not line.startswith("| Block")]
    assert len(rows) >= 15, rows
    columns = ("hdl/", "golden/", "sim/tb/", "tests/", "sim/host/")
    listed = set()
    for block, *cells in rows:
        assert cells[0].strip(), f"{block.strip()}: no RTL"
        for prefix, cell in zip(columns, cells, strict=True):
            for path in re.findall(r"`([^`]+)`", cell):
                assert path.startswith(prefix), f"{block.strip()}: {path} is not under {prefix}"
                assert (root / path).is_file(), f"{block.strip()}: {path} does not exist"
                listed.add(path)
    modules = {p.relative_to(root).as_posix() for p in (root / "hdl").glob("*.py")
               if p.name != "__init__.py"}
    assert modules <= listed, f"hdl modules without a row: {sorted(modules - listed)}"


def test_makefile_names_the_formal_solver():
    """The Makefile's help says which SMT solver `make formal` uses: the flow's default, as the
    README's results table and `nclite doctor` say."""
    import dataclasses

    from sim.verify.formal import flow

    engine = next(f.default for f in dataclasses.fields(flow.FormalProperty) if f.name == "engine")
    makefile = (dc.REPO_ROOT / "Makefile").read_text()
    line = next(ln for ln in makefile.splitlines() if ln.startswith("#   make formal"))
    assert f"yowasp-sby + {engine}" in line, line
