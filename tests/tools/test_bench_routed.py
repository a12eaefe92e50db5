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


def _moe(exact: bool = True) -> dict:
    perf = {"busy": 3000, "tensor_busy": 840, "activation_busy": 600, "dma_busy": 1400,
            "collective_busy": 330}
    return {"seed": 1, "ranks": 4, "link_width": 4, "tokens": 16, "d": 8, "h": 16,
            "capacity": 8, "dropped": 1, "bit_exact": exact, "mismatch": "" if exact else "x",
            "cycles": [7448, 7300, 7448, 7448], "perf": [perf] * 4,
            "comm_share": [0.11, 0.12, 0.105, 0.11]}


def test_moe_rendering_and_rows():
    md = "\n".join(br.render_moe(_moe()))
    assert "| 0 | 7,448 | 3,000 | 840 | 600 | 1,400 | 330 | 11.0 % |" in md
    assert br.moe_failures(_moe()) == []
    ((name, value, detail),) = br.moe_rows(_moe())
    assert name == "MoE layer, 4 cores (expert-parallel, two all-to-alls)"
    assert value == "7 448 cycles (busy 3 000); collective engine 10.5 – 12.0 % of busy cycles"
    assert br.moe_failures(_moe(False)) == ["MoE layer: not bit-exact: x"]
    assert br.moe_rows(_moe(False)) == [] and br.render_moe(None) == []
    assert br.moe_failures({"error": "SimulationFailed: boom"}) == [
        "MoE layer: SimulationFailed: boom"]
