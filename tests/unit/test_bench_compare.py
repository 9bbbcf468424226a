"""`scripts/bench compare`: the table of medians and ratios, and where its own flags end."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
import bench_compare  # noqa: E402


def _run(throughput: float, p99: float, cpu: float) -> dict[str, float]:
    return {"executions": 1000, "throughput_per_s": throughput, "lag_p99_ms": p99,
            "cpu_workload_s": cpu, "pg_cpu_s": 0.1, "redis_cpu_s": 0.0}  # fmt: skip


def test_the_table_gives_each_sides_median_and_the_ratio_of_this_tree_to_rev() -> None:
    base = bench_compare.Side("abc123", Path("/nowhere"), [_run(100, 50, 0.4), _run(120, 70, 0.2), _run(110, 60, 0.3)])
    work = bench_compare.Side("this tree", Path("/nowhere"), [_run(220, 30, 0.1), _run(200, 20, 0.1), _run(240, 40, 0.1)])
    rows = {line.split()[0]: line for line in bench_compare.report(base, work)[1:]}
    assert rows["throughput_per_s"].split()[-1] == "2.00"  # 220 / 110
    assert rows["lag_p99_ms"].split()[-1] == "0.50"  # 30 / 60
    assert rows["cpu_per_execution_us"].split()[-1] == "0.50"  # (0.1 + 0.1) / (0.3 + 0.1) per execution
    assert "100.0/120.0/110.0" in rows["throughput_per_s"]  # every run is shown, not only the median
    assert "jobs_per_s" not in rows  # a figure the scenario does not produce is left out


def _statements_run(dispatch: float, claim: float, finish: float, *, client: bool = True) -> dict[str, object]:
    return {"count": 1000, "batch": 256, "phases": [
        {"name": name, "cpu_us": cpu, "wall_us": 2 * cpu, "wal_bytes": 100.0, "hot_share": None,
         **({"client_cpu_us": cpu / 2} if client else {})}
        for name, cpu in (("dispatch", dispatch), ("claim", claim), ("finish", finish))
    ]}  # fmt: skip


def test_a_statements_compare_gives_each_statements_postgres_cpu_and_their_sum() -> None:
    base = bench_compare.Side("abc123", Path("/nowhere"), [_statements_run(20, 24, 28), _statements_run(22, 26, 30)])
    work = bench_compare.Side("this tree", Path("/nowhere"), [_statements_run(20, 24, 20), _statements_run(22, 26, 22)])
    rows = {line.split()[0]: line for line in bench_compare.report(base, work)[1:]}
    assert rows["finish_pg_us"].split()[-1] == "0.72"  # 21 / 29
    assert rows["dispatch_pg_us"].split()[-1] == "1.00"
    assert rows["statements_pg_us"].split()[-1] == "0.89"  # 67 / 75
    assert rows["finish_client_us"].split()[-1] == "0.72"  # the client's side of each statement too
    assert "throughput_per_s" not in rows and "cpu_per_execution_us" not in rows


def test_a_rev_whose_statements_run_has_no_client_figure_compares_the_rest() -> None:
    base = bench_compare.Side("abc123", Path("/nowhere"), [_statements_run(20, 24, 28, client=False)])
    work = bench_compare.Side("this tree", Path("/nowhere"), [_statements_run(20, 24, 20)])
    rows = {line.split()[0]: line for line in bench_compare.report(base, work)[1:]}
    assert rows["finish_pg_us"].split()[-1] == "0.71"  # 20 / 28
    assert "finish_client_us" not in rows


def test_a_missing_scenario_or_an_unknown_rev_is_refused_before_anything_runs(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        bench_compare.main(["HEAD", "--rounds", "2"])
    assert "give a scenario after REV" in capsys.readouterr().err
    with pytest.raises(SystemExit, match="is not a commit here"):
        bench_compare.main(["no-such-revision-anywhere", "spike", "--count", "10"])
