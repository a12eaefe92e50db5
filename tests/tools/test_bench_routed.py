"""make bench's routed collectives (``sim.tools.bench_routed``): rendering, failures and the
README's rows from hand-made items (the runs themselves are `make bench`'s, and
``tests/hdl/test_ring_rtl.py`` measures the efficiency in both simulators)."""

from sim.tools import bench_routed as br


def _items(exact: bool = True) -> list[dict]:
    out = []
    for op, ranks, w, shift in br.ROUTED_RUNS:
        for n, eff in ((1024, 0.85), (16384, 0.99)):
            bound = n / w * (shift if op == "permute" else max((ranks - 1) / 2, 1))
            out.append({"op": op, "ranks": ranks, "link_width": w, "shift": shift,
                        "latency": br.LATENCY, "words": n, "cycles": round(bound / eff),
                        "bound_cycles": bound, "efficiency": eff, "bit_exact": exact})
    return out


def test_rendering_and_readme_rows():
    items = _items()
    md = "\n".join(br.render_routed(items))
    assert "| all-to-all | 4 | 4 | 16,384 | 6,206 | 6,144 | 0.990 | yes |" in md
    assert "| permute by 3 | 4 | 4 | 1,024 |" in md
    assert br.routed_failures(items) == []
    rows = dict((name, (value, detail)) for name, value, detail in br.readme_rows(items))
    assert rows["ring all-to-all, n = 16 384 words"][0] == "0.990 of its bound"
    assert rows["ring permute, n = 16 384 words"][1].startswith("P = 4, shift = 1, 3")


def test_failures_and_below_target():
    items = _items(exact=False)
    items[3]["efficiency"] = 0.5
    items.append({"op": "permute", "ranks": 8, "link_width": 2, "shift": 5, "words": [1024],
                  "error": "SimulationFailed: boom\nmore"})
    md = "\n".join(br.render_routed(items))
    assert "**0.500** (below 0.9)" in md
    assert "FAILED: SimulationFailed: boom |" in md
    bad = br.routed_failures(items)
    assert "permute by 5 P=8 W=2: SimulationFailed: boom" in bad
    assert sum("not bit-exact" in b for b in bad) == 2 * len(br.ROUTED_RUNS)
    assert br.render_routed([]) == [] and br.readme_rows(None) == []
