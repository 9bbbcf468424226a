"""A/B against a commit: `scripts/bench compare REV [--rounds N] [--keep] SCENARIO ARGS...`
runs the same scenario on REV (checked out in a throwaway worktree with its own venv) and on this
working tree, interleaved (A B, B A, A B, ...) so that drift in the machine falls on both, and
prints each figure's median for both sides and their ratio (this tree / REV). Machines differ
2-3x; a ratio measured back to back on one machine does not. SCENARIO is one of bench.py's, or
`statements` (bench_statements.py: each hot-path statement's Postgres CPU alone, the quieter
A/B for a change to one statement's SQL)."""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench_machine import calibration_line  # beside this file
from schedulerd.embedded import scratch_servers

REPO_ROOT = Path(__file__).resolve().parent.parent
COMPARE_DIR = REPO_ROOT / ".schedulerd-bench" / "compare"
SCENARIOS = ("steady", "spike", "cron", "ingest", "statements")
# The `statements` scenario's script (it came in 99f7b09: older commits cannot run that scenario).
STATEMENTS_SCRIPT = "bench_statements.py"


def _cpu_per_execution_us(r: dict[str, Any]) -> float | None:
    if not r.get("executions"):
        return None
    return 1e6 * (r["cpu_workload_s"] + r["pg_cpu_s"] + r["redis_cpu_s"]) / r["executions"]


def _phase_cpu_us(r: dict[str, Any], name: str, figure: str = "cpu_us") -> float | None:
    """A statement's Postgres CPU (or, with figure client_cpu_us, the client's) per execution in a
    `statements` run; None where the run does not report it (a REV before the client's figure)."""
    return next((p.get(figure) for p in r.get("phases", []) if p["name"] == name), None)


# (figure, how to read it from one run's JSON line); a figure missing on either side is skipped.
FIGURES: dict[str, Callable[[dict[str, Any]], float | None]] = {
    "throughput_per_s": lambda r: r.get("throughput_per_s"),
    "lag_p50_ms": lambda r: r.get("lag_p50_ms"),
    "lag_p99_ms": lambda r: r.get("lag_p99_ms"),
    "drain_s": lambda r: r.get("drain_s"),
    "replicas_cpu_s": lambda r: r.get("cpu_workload_s"),
    "postgres_cpu_s": lambda r: r.get("pg_cpu_s"),
    "redis_cpu_s": lambda r: r.get("redis_cpu_s"),
    "cpu_per_execution_us": _cpu_per_execution_us,
    "rss_mb_max": lambda r: r.get("rss_mb_max"),
    "rss_mb_idle": lambda r: r.get("rss_mb_idle"),
    "jobs_per_s": lambda r: r.get("jobs_per_s_median"),
    "latency_p99_ms": lambda r: (r.get("runs") or [{}])[-1].get("p99_ms"),
    "dispatch_pg_us": lambda r: _phase_cpu_us(r, "dispatch"),
    "claim_pg_us": lambda r: _phase_cpu_us(r, "claim"),
    "finish_pg_us": lambda r: _phase_cpu_us(r, "finish"),
    "statements_pg_us": lambda r: sum(p["cpu_us"] for p in r["phases"]) if "phases" in r else None,
    "dispatch_client_us": lambda r: _phase_cpu_us(r, "dispatch", "client_cpu_us"),
    "claim_client_us": lambda r: _phase_cpu_us(r, "claim", "client_cpu_us"),
    "finish_client_us": lambda r: _phase_cpu_us(r, "finish", "client_cpu_us"),
    "statements_wal_bytes": lambda r: sum(p["wal_bytes"] for p in r["phases"]) if "phases" in r else None,
}


@dataclass
class Side:
    name: str
    root: Path
    results: list[dict[str, Any]] = field(default_factory=list)

    def run(self, scenario_args: list[str], log: Path) -> dict[str, Any]:
        """One benchmark run on this side; its last JSON line, or SystemExit naming the log."""
        script, args = ("bench.py", scenario_args) if scenario_args[0] != "statements" else (STATEMENTS_SCRIPT, scenario_args[1:])
        command = [str(self.root / ".venv" / "bin" / "python"), str(self.root / "scripts" / script), *args]
        with log.open("w") as out:
            done = subprocess.run(command, cwd=self.root, stdout=out, stderr=subprocess.STDOUT, check=False)
        lines = [line for line in log.read_text().splitlines() if line.startswith("{")]
        if done.returncode != 0 or not lines:
            raise SystemExit(f"bench compare: the run on {self.name} failed (exit {done.returncode}); see {log}")
        result: dict[str, Any] = json.loads(lines[-1])
        self.results.append(result)
        return result


def _check_out(rev: str, keep: bool) -> Path:
    """A worktree of REV with its own venv (kept under .schedulerd-bench/compare with --keep)."""
    sha = subprocess.run(["git", "rev-parse", "--verify", f"{rev}^{{commit}}"], cwd=REPO_ROOT, capture_output=True,
                         text=True, check=False)  # fmt: skip
    if sha.returncode != 0:
        raise SystemExit(f"bench compare: {rev!r} is not a commit here")
    root = COMPARE_DIR / sha.stdout.strip()[:12] if keep else Path(tempfile.mkdtemp(prefix="schedulerd-compare-"))
    if not (root / ".venv" / "bin" / "python").exists():
        if root.exists():
            shutil.rmtree(root)
        root.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run(["git", "worktree", "add", "--detach", "--force", str(root), sha.stdout.strip()], cwd=REPO_ROOT,
                       check=True, stdout=subprocess.DEVNULL)  # fmt: skip
        print(f"bench compare: installing {rev} in {root} (a few minutes the first time)", flush=True)
        subprocess.run([str(root / "scripts" / "install")], cwd=root, check=True, stdout=subprocess.DEVNULL)
    return root


def _remove(root: Path) -> None:
    subprocess.run(["git", "worktree", "remove", "--force", str(root)], cwd=REPO_ROOT, check=False,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    shutil.rmtree(root, ignore_errors=True)


def _figure(value: float) -> str:
    return f"{value:,.1f}" if abs(value) < 1000 else f"{value:,.0f}"


def report(base: Side, work: Side) -> list[str]:
    lines = [f"{'figure':<22}{base.name:>32}{work.name:>32}{'ratio':>8}"]
    for name, read in FIGURES.items():
        a = [v for v in map(read, base.results) if v is not None]
        b = [v for v in map(read, work.results) if v is not None]
        if len(a) != len(base.results) or len(b) != len(work.results) or not a:
            continue
        ma, mb = statistics.median(a), statistics.median(b)
        ratio = f"{mb / ma:.2f}" if ma else "-"
        runs_a, runs_b = "/".join(map(_figure, a)), "/".join(map(_figure, b))
        lines.append(f"{name:<22}{_figure(ma) + ' (' + runs_a + ')':>32}{_figure(mb) + ' (' + runs_b + ')':>32}{ratio:>8}")
    return lines


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(prog="scripts/bench compare", usage="%(prog)s REV [--rounds N] [--keep] SCENARIO ARGS...",
                                     description=__doc__.split("\n\n")[0])  # fmt: skip
    parser.add_argument("rev", help="the commit to compare against, e.g. main, 48d6df9, HEAD~3")
    parser.add_argument("--rounds", type=int, default=3, help="runs on each side, interleaved (default 3; medians)")
    parser.add_argument("--keep", action="store_true",
                        help="keep REV's worktree and venv under .schedulerd-bench/compare for the next compare")  # fmt: skip
    # Everything from the scenario's name on is the scenario's, so its flags never clash with ours.
    at = next((i for i, word in enumerate(argv) if word in SCENARIOS), len(argv))
    args, scenario = parser.parse_args(argv[:at]), argv[at:]
    if not scenario:
        parser.error(f"give a scenario after REV: one of {', '.join(SCENARIOS)} (e.g. spike --count 50000)")
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    root = _check_out(args.rev, args.keep)
    try:
        if scenario[0] == "statements" and not (root / "scripts" / STATEMENTS_SCRIPT).exists():
            raise SystemExit(f"bench compare: {args.rev} has no scripts/{STATEMENTS_SCRIPT} (it came in 99f7b09)")
        base, work = Side(f"{args.rev}", root), Side("this tree", REPO_ROOT)
        with scratch_servers(REPO_ROOT / ".schedulerd-bench") as servers:
            print(calibration_line(servers.admin_url), flush=True)
        logs = Path(tempfile.mkdtemp(prefix="schedulerd-compare-logs-"))
        for round_ in range(args.rounds):
            for side in (base, work) if round_ % 2 == 0 else (work, base):
                result = side.run(scenario, logs / f"{round_ + 1}-{'base' if side is base else 'work'}.log")
                print(f"round {round_ + 1} {side.name}: " + ", ".join(
                    f"{name} {_figure(v)}" for name, read in FIGURES.items() if (v := read(result)) is not None
                ), flush=True)  # fmt: skip
        print(f"bench compare: {' '.join(scenario)}; medians of {args.rounds}, ratio = this tree / {args.rev}; logs in {logs}")
        for line in report(base, work):
            print(line)
    finally:
        if not args.keep:
            _remove(root)
    return 0


if __name__ == "__main__":
    sys.exit(main())
