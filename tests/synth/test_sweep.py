"""Design-space sweeps on Dask (`synth/sweep.py`, `nclite synth sweep`).

`make test` checks the grid, the Pareto front and the Dask plumbing (a local cluster, and a
scheduler given by address) with a stand-in for the synthesis; `make test-full` runs a real
two-point sweep through the CLI on a local cluster of worker processes.
"""

import json

import pytest
from click.testing import CliRunner

from synth import sweep


def _fake_synthesis(job):
    """Stands in for a synthesis: area grows with MACs, fewer stages make fewer LUTs and a
    slower clock (the sweep only moves results around)."""
    mul, add = job["mul_stages"], job["add_stages"]
    luts = 900 * job["macs"] + 40 * (mul + add) + (120 if job["formats"] == "all" else 0)
    fmax = 40.0 + 12.5 * (mul + add) if job["timing"] else None
    return {**job, "area": {"luts": luts, "ffs": 10, "dsps": job["macs"], "brams": 0},
            "timing": {"fmax_mhz": fmax} if fmax else None, "cached": False}


def test_grid_checks_every_option():
    g = sweep.parse_grid(sizes="2, 1,2", stages="5/6,2/3,5/6", formats="bf16",
                         devices="ecp5-85f,ice40-up5k")
    assert g.sizes == (2, 1) and g.stages == ((5, 6), (2, 3)) and g.points == 8
    jobs = sweep.sweep_jobs(g)
    assert len(jobs) == 8 and len({(j["name"], j["device"]) for j in jobs}) == 8
    assert jobs[0]["params"] == {"mul_stages": 5, "add_stages": 6, "formats": ["bf16"], "n": 2}
    assert jobs[0]["macs"] == 4 and sweep.sweep_jobs(
        sweep.parse_grid(design="pe_column", sizes="3"))[0]["macs"] == 3
    # A PE's operands arrive decoded: no formats parameter, only the set "all".
    assert sweep.sweep_jobs(sweep.parse_grid(design="pe", sizes="1", formats="all"))[0][
        "params"] == {"mul_stages": 5, "add_stages": 6}
    for kwargs, names in [({"design": "gpu"}, "design"), ({"sizes": "0"}, "n"),
                          ({"sizes": "two"}, "n"), ({"sizes": ","}, "n"),
                          ({"design": "pe", "sizes": "2"}, "n must be 1"),
                          ({"design": "pe", "sizes": "1", "formats": "bf16"},
                           "formats must be 'all'"),
                          ({"stages": "5"}, "stages"), ({"stages": "9/1"}, "stages"),
                          ({"formats": "int8"}, "formats"), ({"devices": "xc7"}, "device")]:
        with pytest.raises(ValueError, match=f"^{names}"):
            sweep.parse_grid(**kwargs)


def test_pareto_front():
    def r(luts, fmax, macs):
        return {"area": {"luts": luts}, "timing": {"fmax_mhz": fmax}, "macs": macs}

    results = [r(1000, 100, 1),   # 0: smallest
               r(1200, 90, 1),    # 1: dominated by 0
               r(3000, 80, 4),    # 2: more MACs
               r(3000, 70, 4),    # 3: dominated by 2
               r(5000, 120, 4),   # 4: fastest
               {"error": "boom", "macs": 4},  # 5: failed, never on the front
               r(3000, 80, 4)]    # 6: equal to 2: neither dominates
    assert sweep.pareto(results) == {0, 2, 4, 6}
    # Area-only points (no Fmax) compete on LUTs and MACs.
    area_only = [{"area": {"luts": n}, "timing": None, "macs": m}
                 for n, m in [(10, 1), (20, 1), (30, 4)]]
    assert sweep.pareto(area_only) == {0, 2}


@pytest.mark.parametrize("by_address", [False, True], ids=["local-cluster", "scheduler-address"])
def test_sweep_runs_on_dask(tmp_path, by_address):
    """Every point runs once on the cluster, results come back in grid order with the front
    marked, and the table, JSON and plot are written."""
    from distributed import LocalCluster

    grid = sweep.parse_grid(sizes="1,2", stages="5/6,2/3", formats="all,bf16")
    cluster = None
    kwargs = {"processes": False, "run": _fake_synthesis}
    if by_address:
        cluster = LocalCluster(n_workers=1, threads_per_worker=2, processes=False,
                               dashboard_address=None)
        kwargs["scheduler"] = cluster.scheduler_address
    try:
        result = sweep.run_sweep(grid, **kwargs)
    finally:
        if cluster is not None:
            cluster.close()
    assert result["scheduler"] == (kwargs["scheduler"] if by_address else "local (2 workers)")
    rows = result["results"]
    assert [r["name"] for r in rows] == [j["name"] for j in sweep.sweep_jobs(grid)]
    expected = sweep.pareto([_fake_synthesis(j) for j in sweep.sweep_jobs(grid)])
    assert {i for i, r in enumerate(rows) if r["pareto"]} == expected and expected
    paths = sweep.write_sweep(result, tmp_path)
    md = (tmp_path / "sweep.md").read_text()
    assert md.count("| tensor_engine |") == 8 and md.count("**yes**") == len(expected)
    # N = 2 (4 MACs), 2/3 stages, bf16: 900 * 4 + 40 * 5 LUTs, 40 + 12.5 * 5 MHz.
    row = "| tensor_engine | ecp5-85f | 2 | 2/3 | bf16 | 3800 | 4 | 102.5 | 4 | 410.0 | **yes** |"
    assert row in md
    assert json.loads((tmp_path / "sweep.json").read_text())["grid"]["stages"] == ["5/6", "2/3"]
    assert paths[-1].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_cli_names_a_bad_option():
    from sim.cli.app import main

    out = CliRunner().invoke(main, ["synth", "sweep", "--stages", "5-6"])
    assert out.exit_code == 2 and "stages must be MUL/ADD pairs" in out.output


@pytest.mark.slow
def test_cli_sweep_synthesizes(tmp_path):
    """A real sweep (two PEs, area only, on iCE40) on a local cluster of worker processes."""
    from sim.cli.app import main

    out = CliRunner().invoke(main, ["synth", "sweep", "--design", "pe", "--n", "1",
                                    "--stages", "2/3,0/0", "--device",
                                    "ice40-up5k", "--area-only", "--out", str(tmp_path)])
    assert out.exit_code == 0, out.output
    rows = json.loads((tmp_path / "sweep.json").read_text())["results"]
    assert [r["mul_stages"] for r in rows] == [2, 0]
    assert all(r["area"]["luts"] > 400 and r["area"]["dsps"] >= 1 for r in rows), rows
    assert any(r["pareto"] for r in rows)


def _failing_synthesis(job):
    if job["n"] == 2:
        raise RuntimeError("worker | lost")
    return _fake_synthesis(job)


def test_a_failed_point_is_a_row(tmp_path):
    """A job that raises on its worker becomes its row's error (the table stays a table); the
    other points and their front stand."""
    grid = sweep.parse_grid(sizes="1,2", stages="5/6", formats="bf16")
    result = sweep.run_sweep(grid, processes=False, run=_failing_synthesis)
    rows = result["results"]
    assert "error" not in rows[0] and rows[0]["pareto"]
    assert rows[1]["error"] == "RuntimeError: worker | lost" and not rows[1]["pareto"]
    md = sweep.render_md(result)
    assert "| tensor_engine | ecp5-85f | 2 | 5/6 | bf16 | failed: RuntimeError: worker / lost" in md
