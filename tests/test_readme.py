"""README.md's results table is generated from the committed bench and synthesis results."""

import pytest

from sim import readme


def test_results_table_is_current():
    bench, synth = readme.load()
    assert not bench.get("quick"), "bench/results.json must come from a full `make bench`"
    text = (readme.REPO_ROOT / "README.md").read_text()
    assert readme.update(text, readme.render(bench, synth)) == text, (
        "README.md's results table differs from bench/results.json and synth/report.json: "
        "run `make readme`")


def test_table_shows_what_the_issue_asks_for():
    table = readme.render(*readme.load())
    for what in ("bit-exact", "of MAC slots", "LUTs", "MHz", "of the ring bound"):
        assert what in table, what


def test_update_needs_the_markers():
    with pytest.raises(ValueError, match="results:begin"):
        readme.update("no markers here", "table")
    text = f"a\n{readme.BEGIN}\nold\n{readme.END}\nb\n"
    assert readme.update(text, "new") == f"a\n{readme.BEGIN}\nnew\n{readme.END}\nb\n"


def test_reliability_table_is_current():
    text = (readme.REPO_ROOT / "README.md").read_text()
    table = readme.render_reliability(*readme.load_reliability())
    assert readme.update(text, table, readme.R_BEGIN, readme.R_END) == text, (
        "README.md's reliability table differs from docs/formal.json and docs/coverage.json: "
        "run `make readme`")
    for what in ("formal: stream protocol", "proven", "Verilator code coverage",
                 "functional coverage: sru"):
        assert what in table, what


def test_reliability_table_refuses_a_failed_proof():
    formal, coverage = readme.load_reliability()
    broken = dict(formal, results=[dict(formal["results"][0], ok=False)])
    with pytest.raises(ValueError, match="not as expected"):
        readme.render_reliability(broken, coverage)
