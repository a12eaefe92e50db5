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
