"""The benchmark runner: ``python -m benchmarks [--quick]``.

For each corpus size it generates the corpus into a temporary directory and,
in the same run, measures the read floor, the libyaml compose floor (the
baseline of the performance budget, docs/performance.md) and ``poolgate scan`` as a
subprocess with its peak RSS; medians of the repeats. Then a one-file scan
(the pre-commit path), Checkov on 1,000 objects when it is installed, and
``poolgate audit`` on generated snapshots once that command exists: the
controllers shape (pods under controllers in the snapshot, sharing their
templates: the budget line) and the worst case (every pod its own template,
owners absent), both in the same run. Then the pools x workloads shape: N GPU
NodePools with a Deployment pinned to each, whose cost must grow linearly in N;
``--against CHECKOUT`` times another checkout's poolgate on the same inputs,
alternating with this one's. Last, a 10,000-finding HTML report: its size, and its
load time in headless Chromium when one is installed (benchmarks/htmlreport.py).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchmarks.corpus import generate_corpus, write_corpus
from benchmarks.emit import dump_stream
from benchmarks.measure import (
    ChildRun,
    has_libyaml,
    libyaml_floor,
    peak_tree_pss,
    read_floor,
    run_child,
)
from benchmarks.pools import write_pools
from benchmarks.snapshot import write_snapshot

if TYPE_CHECKING:
    from benchmarks.htmlreport import HtmlResult

REPO_ROOT = Path(__file__).resolve().parents[1]
FULL_SIZES = (1_000, 10_000, 50_000)
QUICK_SIZES = (1_000, 2_000)
FULL_REPEATS = 3
QUICK_REPEATS = 2
FULL_SNAPSHOT = (5_000, 100_000)  # nodes, pods: the budget's snapshot line
QUICK_SNAPSHOT = (500, 10_000)
AUDIT_BUDGET_SECONDS = 15
AUDIT_BUDGET_GIB = 2
REFERENCE_COMPOSE_SECONDS = (2.4, 2.8)
"""libyaml's compose of the 10,000-object corpus on the machine the budget was set on
(docs/performance.md): the snapshot's 15 s is 5.4-6.25 times that, a ratio any host
can measure."""
# Snapshot shapes (benchmarks/snapshot.py), in the order they are measured.
SHAPES = {
    "controllers": "controllers, pods share their templates",
    "unique": "worst case: every pod its own template, owners absent",
}
FULL_POOLS = (1_000, 4_000)  # NodePools, each with one Deployment: issue 21's shape
QUICK_POOLS = (500, 2_000)
CHECKOV_SIZE = 1_000
ONE_FILE_REPEATS = 5
SCAN_OK = (0, 1)  # 1 = findings; anything else is a failure
MARKER = ".poolgate-benchmark"  # marks --keep directories this runner may replace

BUDGET = """\
Budget (docs/performance.md, 2-core machine):
  10,000-object corpus   <= 1.5x libyaml compose of the same files, same run (stretch <= 1.5 s)
  snapshot 5k nodes/100k pods  <= 15 s wall, <= 2 GB peak (stretch <= 8 s); judged on the
                         controllers shape, the worst case shown beside it
  one small file         <= 0.35 s wall including start-up (stretch <= 0.2 s)
  vs Checkov             >= 15x faster on 1,000 objects (stretch >= 100x on 10,000)
  growth                 linear in objects (1k -> 10k -> 50k)"""


def _mb(n: float | None) -> str:
    return "-" if n is None else f"{n / 1e6:.1f}"


def _s(x: float | None) -> str:
    return "-" if x is None else f"{x:.3f}"


def _per(x: float | None, k: float) -> str:
    return "-" if x is None else f"{x / k:.3f}"


def _median(xs: list[float]) -> float | None:
    return statistics.median(xs) if xs else None


@dataclass
class Measured:
    """Medians (and raw runs) of one tool on one input."""

    runs: list[float] = field(default_factory=list)
    peak_rss: list[int] = field(default_factory=list)
    error: str | None = None

    @property
    def seconds(self) -> float | None:
        return _median(self.runs)

    @property
    def rss(self) -> int | None:
        return max(self.peak_rss) if self.peak_rss else None

    def cells(self) -> tuple[str, str]:
        """The report's wall-time and peak-RSS cells (MB)."""
        seconds = self.seconds
        wall = "FAILED" if self.error and seconds is None else _s(seconds)
        return wall, "-" if self.rss is None else f"{self.rss / 2**20:.0f}"


@dataclass
class SizeResult:
    objects: int
    files: int
    bytes: int
    read: Measured = field(default_factory=Measured)
    libyaml: Measured = field(default_factory=Measured)
    poolgate: Measured = field(default_factory=Measured)


@dataclass
class AuditResult:
    """``poolgate audit --snapshot`` on one generated snapshot."""

    shape: str  # a key of SHAPES
    nodes: int
    pods: int
    controllers: int
    bytes: int
    audit: Measured = field(default_factory=Measured)
    tree_pss: int | None = None
    """Peak proportional set size of the command and every process it started (a
    large audit forks a helper), from one more, untimed run; None where not measured."""

    @property
    def memory(self) -> int | None:
        """What the memory budget is judged on: the larger of the main process's peak
        RSS and all processes' proportional set size."""
        known = [value for value in (self.audit.rss, self.tree_pss) if value is not None]
        return max(known) if known else None

    @property
    def budget_size(self) -> bool:
        return (self.nodes, self.pods) == FULL_SNAPSHOT


@dataclass
class PoolsResult:
    """``poolgate scan`` of the pools x workloads shape (benchmarks/pools.py)."""

    pools: int
    bytes: int
    poolgate: Measured = field(default_factory=Measured)
    against: Measured | None = None
    """The same scans with ``--against``'s checkout, alternating with this one's."""


@dataclass
class Report:
    machine: dict[str, Any]
    sizes: list[SizeResult] = field(default_factory=list)
    pools: list[PoolsResult] | None = None  # None: not run (--no-pools)
    against: str | None = None  # the other checkout of --against
    one_file: Measured | None = None
    one_file_cold: Measured | None = None
    one_file_against: Measured | None = None
    """The one-file scan with ``--against``'s checkout, alternating with this one's."""
    checkov: dict[str, Any] | None = None
    audit: list[AuditResult] | None = None  # None: not run (--no-audit)
    audit_unavailable: str | None = None  # why ``poolgate audit`` could not run
    html: HtmlResult | None = None  # None: not run (--no-html)
    notes: list[str] = field(default_factory=list)
    failed: bool = False


# ---- the poolgate command ---------------------------------------------------


def _poolgate(*args: str) -> list[str]:
    return [sys.executable, "-m", "scanner", *args]


def child_environment(state: Path) -> dict[str, str]:
    """The environment poolgate runs in: this one, with its caches under ``state``.

    An installed poolgate has its modules compiled to bytecode (pip does that) and,
    after its first run, a warm rule validation cache (scanner/ruleset/cache.py). A
    checkout run with ``PYTHONDONTWRITEBYTECODE=1`` would compile every module on every
    start instead (about 0.2 s here), which measures the environment, not poolgate.
    So bytecode goes to ``state/pycache`` (``PYTHONPYCACHEPREFIX``: nothing is written
    into the checkout) and the rule cache to ``state/cache``; the one-file scan is
    also timed once with both empty (the first run after installing).
    """
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = str(state / "pycache")
    env["POOLGATE_CACHE_DIR"] = str(state / "cache")
    return env


def command_available(name: str, env: dict[str, str] | None = None) -> tuple[bool, str]:
    """Whether ``poolgate <name> --help`` works, and why not."""
    run = run_child(_poolgate(name, "--help"), cwd=REPO_ROOT, timeout=60, env=env)
    if run.returncode == 0:
        return True, ""
    return False, run.stderr_tail(1) or f"exit {run.returncode}"


def _record(measured: Measured, run: ChildRun, ok: tuple[int, ...]) -> bool:
    if run.timed_out or run.returncode not in ok:
        why = "timed out" if run.timed_out else f"exit {run.returncode}"
        measured.error = f"{why}: {run.stderr_tail()}"
        return False
    measured.runs.append(run.seconds)
    if run.peak_rss is not None:
        measured.peak_rss.append(run.peak_rss)
    return True


def time_command(
    argv: list[str],
    repeats: int,
    timeout: float,
    ok: tuple[int, ...],
    env: dict[str, str] | None = None,
) -> Measured:
    """Median wall time of ``argv``; stops at the first failing run."""
    measured = Measured()
    for _ in range(repeats):
        if not _record(measured, run_child(argv, cwd=REPO_ROOT, timeout=timeout, env=env), ok):
            break
    return measured


# ---- inputs -----------------------------------------------------------------


@contextmanager
def workdir(keep: Path | None, name: str) -> Iterator[Path]:
    """A fresh directory: ``keep/name`` (kept) or a temporary one (removed)."""
    if keep is None:
        with tempfile.TemporaryDirectory(prefix=f"poolgate-bench-{name}-") as tmp:
            yield Path(tmp)
        return
    path = keep / name
    if path.exists():
        if not (path / MARKER).exists():
            raise SystemExit(f"error: {path} exists and was not made by the benchmark; remove it")
        shutil.rmtree(path)
    path.mkdir(parents=True)
    (path / MARKER).write_text("generated by python -m benchmarks; safe to delete\n")
    yield path


def one_deployment(seed: int) -> str:
    """A single small Deployment (the pre-commit case) from the corpus generator."""
    for cf in generate_corpus(200, seed):
        for obj in cf.objects:
            if obj["kind"] == "Deployment":
                return dump_stream([obj])
    raise AssertionError("the generator made no Deployment")  # pragma: no cover


def checkov_command() -> list[str] | None:
    exe = shutil.which("checkov")
    if exe:
        return [exe]
    if importlib.util.find_spec("checkov") is not None:
        return [sys.executable, "-m", "checkov.main"]
    return None


# ---- the run ----------------------------------------------------------------


def measure_size(
    objects: int,
    repeats: int,
    args: argparse.Namespace,
    scan_ok: bool,
    report: Report,
    say: Callable[..., None],
) -> None:
    with workdir(args.keep, f"corpus-{objects}") as work:
        corpus = work / "corpus"
        info = write_corpus(corpus, objects, args.seed)
        result = SizeResult(info.objects, info.files, info.bytes)
        report.sizes.append(result)
        say(f"  {objects:>7,} objects: {info.files:,} files, {_mb(info.bytes)} MB", end="")
        scan = None
        if scan_ok:
            out = work / "scan.json"
            scan = _poolgate("scan", str(corpus), "--format", "json", "--output", str(out))
        # Floors and poolgate alternate within each repeat, so a change in
        # machine load affects both sides of the ratio alike.
        for _ in range(repeats):
            result.read.runs.append(read_floor(corpus))
            floor = libyaml_floor(corpus, timeout=args.timeout, env=args.env)
            if floor.documents != info.objects:
                report.notes.append(
                    f"libyaml composed {floor.documents} documents for {info.objects} objects"
                )
            result.libyaml.runs.append(floor.seconds)
            if scan is not None and result.poolgate.error is None:
                run = run_child(scan, cwd=REPO_ROOT, timeout=args.timeout, env=args.env)
                report.failed |= not _record(result.poolgate, run, SCAN_OK)
        say(f"; libyaml {_s(result.libyaml.seconds)} s", end="")
        if scan is not None:
            say(f"; poolgate {_s(result.poolgate.seconds)} s", end="")
        say("")
        if objects == CHECKOV_SIZE and args.checkov:
            report.checkov = run_checkov(corpus, result, args, say)


def run_checkov(
    corpus: Path, result: SizeResult, args: argparse.Namespace, say: Callable[..., None]
) -> dict[str, Any]:
    cmd = checkov_command()
    if cmd is None:
        return {"available": False}
    argv = [*cmd, "-d", str(corpus), "--framework", "kubernetes", "--quiet", "--compact"]
    argv += ["-o", "json"]
    say(f"  checkov on {result.objects:,} objects (one run; it is slow)...")
    # Checkov exits 1 when checks fail; one run, as it takes ~10 s per 1,000 objects.
    measured = time_command(argv, 1, args.timeout * 4, (0, 1))
    return {
        "available": True,
        "objects": result.objects,
        "seconds": measured.seconds,
        "peak_rss": measured.rss,
        "error": measured.error,
        "poolgate_seconds": result.poolgate.seconds,
    }


def run_audit(args: argparse.Namespace, report: Report, say: Callable[..., None]) -> None:
    """``poolgate audit --snapshot`` on each requested shape, one snapshot on disk at a time."""
    report.audit = []
    ok, why = command_available("audit", args.env)
    if not ok:
        report.audit_unavailable = why
        return
    nodes, pods = args.snapshot
    for shape in args.snapshot_shapes:
        with workdir(args.keep, f"snapshot-{nodes}-{pods}-{shape}") as work:
            snap = work / "snapshot.json"
            info = write_snapshot(snap, nodes, pods, args.seed, controllers=shape == "controllers")
            say(
                f"  audit: snapshot {nodes:,} nodes + {pods:,} pods, {SHAPES[shape]}: "
                f"{info.controllers:,} controllers, {_mb(info.bytes)} MB"
            )
            out = work / "audit.json"
            argv = _poolgate(
                "audit", "--snapshot", str(snap), "--format", "json", "--output", str(out)
            )
            repeats = 1 if args.quick else args.repeats  # keeps --quick quick
            measured = time_command(argv, repeats, args.timeout, SCAN_OK, args.env)
            report.failed |= measured.error is not None
            result = AuditResult(shape, nodes, pods, info.controllers, info.bytes, measured)
            if measured.error is None:
                result.tree_pss = peak_tree_pss(
                    argv, cwd=REPO_ROOT, timeout=args.timeout, env=args.env
                )
            report.audit.append(result)


def run_pools(args: argparse.Namespace, report: Report, say: Callable[..., None]) -> None:
    """``poolgate scan`` of the pools x workloads shape at each count; with
    ``--against``, the other checkout's on the same inputs, alternating in each repeat
    so that a change in machine load affects both alike."""
    report.pools = []
    report.against = None if args.against is None else str(args.against)
    for count in args.pools:
        with workdir(args.keep, f"pools-{count}") as work:
            info = write_pools(work / "pools", count, args.seed)
            result = PoolsResult(count, info.bytes)
            report.pools.append(result)
            say(f"  pools x workloads: {count:,} NodePools + {count:,} Deployments", end="")
            argv = _poolgate(
                "scan", str(work / "pools"), "--format", "json", "--output", str(work / "o.json")
            )
            sides = [(result.poolgate, REPO_ROOT)]
            if args.against is not None:
                result.against = Measured()
                sides.append((result.against, args.against))
            for _ in range(args.repeats):
                for measured, root in sides:
                    if measured.error is None:
                        run = run_child(argv, cwd=root, timeout=args.timeout, env=args.env)
                        report.failed |= not _record(measured, run, SCAN_OK)
            say(f"; {_s(result.poolgate.seconds)} s", end="")
            if result.against is not None:
                say(f"; against {_s(result.against.seconds)} s", end="")
            say("")


def _alternating(argv: list[str], args: argparse.Namespace) -> tuple[Measured, Measured]:
    """``argv`` run in this checkout and in ``--against``'s, alternating, after one
    untimed run in each (its bytecode and rule cache warm, as an installed poolgate's
    are after its first run): the one-file scan's medians, side by side."""
    mine, theirs = Measured(), Measured()
    sides = ((mine, REPO_ROOT), (theirs, args.against))
    for _, root in sides:
        run_child(argv, cwd=root, timeout=args.timeout, env=args.env)
    for _ in range(ONE_FILE_REPEATS):
        for measured, root in sides:
            if measured.error is None:
                _record(
                    measured, run_child(argv, cwd=root, timeout=args.timeout, env=args.env), SCAN_OK
                )
    return mine, theirs


def run(args: argparse.Namespace, say: Callable[..., None] = print) -> Report:
    with tempfile.TemporaryDirectory(prefix="poolgate-bench-state-") as state:
        args.env = child_environment(Path(state) / "warm")
        args.cold_env = child_environment(Path(state) / "cold")
        return _run(args, say)


def _run(args: argparse.Namespace, say: Callable[..., None]) -> Report:
    report = Report(machine=machine_info())
    load, cpus = report.machine["loadavg_start"], report.machine["cpus"] or 1
    if load and load[0] > cpus / 2:
        report.notes.append(f"load average {load[0]} on {cpus} CPUs at start: timings are noisy")
    if not has_libyaml():
        raise SystemExit("error: PyYAML without libyaml (yaml.CSafeLoader); the baseline needs it")
    scan_ok, why = command_available("scan", args.env)
    if not scan_ok:
        report.notes.append(f"poolgate scan: not available yet ({why})")
        report.failed = True
    say(
        f"sizes {', '.join(f'{n:,}' for n in args.sizes)}; {args.repeats} repeats; seed {args.seed}"
    )
    for objects in args.sizes if args.corpus else ():
        measure_size(objects, args.repeats, args, scan_ok, report, say)
    if args.checkov and report.checkov is None:
        if checkov_command() is None:
            report.checkov = {"available": False}
        else:  # the sizes skipped 1,000: make that corpus just for the comparison
            extra = Report(machine={})
            measure_size(CHECKOV_SIZE, min(args.repeats, 2), args, scan_ok, extra, say)
            report.checkov = extra.checkov
            report.failed |= extra.failed
    if scan_ok and args.one_file:
        with workdir(args.keep, "one-file") as work:
            path = work / "deployment.yaml"
            path.write_text(one_deployment(args.seed), encoding="utf-8")
            argv = _poolgate(
                "scan", str(path), "--format", "json", "--output", str(work / "o.json")
            )
            # First run after installing: no bytecode, no rule cache. It warms them.
            report.one_file_cold = time_command(argv, 1, args.timeout, SCAN_OK, args.cold_env)
            if args.against is None:
                report.one_file = time_command(
                    argv, ONE_FILE_REPEATS, args.timeout, SCAN_OK, args.env
                )
            else:
                report.against = str(args.against)
                report.one_file, report.one_file_against = _alternating(argv, args)
                report.failed |= report.one_file_against.error is not None
            if report.one_file.error or report.one_file_cold.error:
                report.failed = True
    if args.audit:
        run_audit(args, report, say)
    if scan_ok and args.pools:
        run_pools(args, report, say)
    if args.html:
        from benchmarks import htmlreport  # imports the scanner's reporters

        say(f"  html report: {args.html_findings:,} findings")
        with workdir(args.keep, "html-report") as work:
            report.html = htmlreport.measure(
                work / "report.html",
                args.repeats,
                args.html_findings,
                args.seed,
                against=args.against,
                timeout=args.timeout,
            )
        report.failed |= (report.html.browser or "").startswith(("page errors", "failed"))
        report.failed |= report.html.against is not None and not report.html.against.write
    report.machine["loadavg_end"] = _loadavg()
    return report


# ---- output -----------------------------------------------------------------


def _loadavg() -> list[float] | None:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except (AttributeError, OSError):
        return None


def machine_info() -> dict[str, Any]:
    import yaml

    return {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "pyyaml": yaml.__version__,
        "libyaml": has_libyaml(),
        "loadavg_start": _loadavg(),
    }


def _ratio(a: float | None, b: float | None) -> str:
    return "-" if a is None or b is None or b == 0 else f"{a / b:.2f}x"


def corpus_lines(report: Report) -> list[str]:
    """The corpus table and its growth, one row per size."""
    lines = [
        f"{'objects':>8} {'files':>6} {'MB':>6} {'read s':>8} {'libyaml s':>10} "
        f"{'poolgate s':>11} {'pg/libyaml':>11} {'peak RSS MB':>12}",
    ]
    for r in report.sizes:
        pg = r.poolgate.seconds
        pg_text, rss = r.poolgate.cells()
        lines.append(
            f"{r.objects:>8,} {r.files:>6,} {_mb(r.bytes):>6} {_s(r.read.seconds):>8} "
            f"{_s(r.libyaml.seconds):>10} {pg_text:>11} "
            f"{_ratio(pg, r.libyaml.seconds):>11} {rss:>12}"
        )
    lines += ["", "growth (seconds per 1,000 objects):"]
    for r in report.sizes:
        k = r.objects / 1000
        lines.append(
            f"  {r.objects:>7,}: poolgate {_per(r.poolgate.seconds, k)}, "
            f"libyaml {_per(r.libyaml.seconds, k)}"
        )
    lines.append("")
    return lines


def format_report(report: Report) -> str:
    m = report.machine
    lines = [
        f"python {m['python']} on {m['platform']}, {m['cpus']} CPUs, PyYAML {m['pyyaml']} "
        f"(libyaml {m['libyaml']}), load average {m['loadavg_start']} -> {m.get('loadavg_end')}",
        "",
    ]
    lines += corpus_lines(report) if report.sizes else ["corpus: skipped (--no-corpus)", ""]
    if report.one_file is not None:
        one = report.one_file
        text = f"{_s(one.seconds)} s (median of {len(one.runs)})" if one.runs else "FAILED"
        lines.append(f"one small file (pre-commit, start-up included): {text}")
        cold = report.one_file_cold
        if cold is not None and cold.runs:
            lines.append(
                f"  first run after installing (no bytecode, no rule cache): {_s(cold.seconds)} s"
            )
        theirs = report.one_file_against
        if theirs is not None:
            text = f"{_s(theirs.seconds)} s" if theirs.runs else f"FAILED ({theirs.error})"
            lines.append(
                f"  against {report.against}: {text}, alternating run by run; "
                f"this/against {_ratio(one.seconds, theirs.seconds)}"
            )
    ck = report.checkov
    if ck is None or not ck.get("available"):
        lines.append("checkov: not installed")
    elif ck.get("error"):
        lines.append(f"checkov: failed ({ck['error']})")
    else:
        lines.append(
            f"checkov on {ck['objects']:,} objects: {_s(ck['seconds'])} s; "
            f"checkov/poolgate = {_ratio(ck['seconds'], ck['poolgate_seconds'])}"
        )
    lines += audit_lines(report)
    lines += pools_lines(report)
    lines += _html_lines(report.html)
    for r in report.sizes:
        if r.poolgate.error:
            lines.append(f"poolgate scan failed on {r.objects:,} objects: {r.poolgate.error}")
    if report.one_file is not None and report.one_file.error:
        lines.append(f"poolgate scan failed on one file: {report.one_file.error}")
    lines += [f"note: {n}" for n in report.notes]
    lines += ["", BUDGET, "", "Verdict (this run):", *verdicts(report)]
    return "\n".join(lines)


def _html_lines(result: HtmlResult | None) -> list[str]:
    from benchmarks import htmlreport  # imports the scanner's reporters: only when asked

    return htmlreport.lines(result)


def audit_lines(report: Report) -> list[str]:
    """The audit table: one row per snapshot shape."""
    if report.audit is None:
        return ["audit: skipped (--no-audit)"]
    if report.audit_unavailable is not None:
        return ["audit: not available yet"]
    lines: list[str] = []
    for size in dict.fromkeys((a.nodes, a.pods) for a in report.audit):
        nodes, pods = size
        lines += [
            f"audit --snapshot, {nodes:,} nodes + {pods:,} pods:",
            f"  {'shape':<54} {'MB':>6} {'controllers':>11} {'wall s':>8} {'peak RSS MB':>12}"
            f" {'all PSS MB':>11}",
        ]
        for a in report.audit:
            if (a.nodes, a.pods) != size:
                continue
            wall, rss = a.audit.cells()
            pss = "-" if a.tree_pss is None else f"{a.tree_pss / 2**20:.0f}"
            lines.append(
                f"  {SHAPES[a.shape]:<54} {_mb(a.bytes):>6} {a.controllers:>11,} "
                f"{wall:>8} {rss:>12} {pss:>11}"
            )
        lines.append(
            "  (peak RSS: the main process; all PSS: it and the processes it started, "
            "proportional, one more untimed run)"
        )
    for a in report.audit:
        if a.audit.error:
            lines.append(f"audit failed on the {a.shape} snapshot: {a.audit.error}")
    return lines


def pools_lines(report: Report) -> list[str]:
    """The pools x workloads table: one row per count."""
    if report.pools is None:
        return ["pools x workloads: skipped (--no-pools)"]
    header = (
        f"  {'NodePools':>9} {'MB':>6} {'poolgate s':>11} {'s per 1,000':>12} {'peak RSS MB':>12}"
    )
    if report.against is not None:
        header += f" {'against s':>10} {'this/against':>13}"
    lines = ["pools x workloads (N GPU NodePools, N Deployments each pinned to one):", header]
    for p in report.pools:
        wall, rss = p.poolgate.cells()
        row = (
            f"  {p.pools:>9,} {_mb(p.bytes):>6} {wall:>11} "
            f"{_per(p.poolgate.seconds, p.pools / 1000):>12} {rss:>12}"
        )
        if p.against is not None:
            other, _ = p.against.cells()
            row += f" {other:>10} {_ratio(p.poolgate.seconds, p.against.seconds):>13}"
        lines.append(row)
    if report.against is not None:
        lines.append(f"  (against: the poolgate of {report.against}, alternating run by run)")
    for p in report.pools:
        for name, measured in (("this checkout", p.poolgate), ("against", p.against)):
            if measured is not None and measured.error:
                lines.append(f"pools x workloads failed on {p.pools:,} ({name}): {measured.error}")
    return lines


def verdicts(report: Report) -> list[str]:
    """Each budget line this run measured: met, or missed by how much."""
    found: list[str] = []

    def judge(name: str, value: float, limit: float, unit: str, smaller: bool = True) -> None:
        ok = value <= limit if smaller else value >= limit
        if ok:
            found.append(f"  {name}: {value:.2f}{unit} (budget {limit:g}{unit}): met")
        else:
            miss = value - limit if smaller else limit - value
            found.append(
                f"  {name}: {value:.2f}{unit} (budget {limit:g}{unit}): "
                f"MISSED by {miss:.2f}{unit} ({value / limit:.2f}x the budget)"
            )

    for r in report.sizes:
        if r.objects == 10_000 and r.poolgate.seconds and r.libyaml.seconds:
            ratio = r.poolgate.seconds / r.libyaml.seconds
            judge("10,000 objects, poolgate / libyaml compose", ratio, 1.5, "x")
            judge("10,000 objects, stretch wall time", r.poolgate.seconds, 1.5, " s")
    if report.one_file is not None and report.one_file.seconds is not None:
        judge("one small file, warm", report.one_file.seconds, 0.35, " s")
    for au in report.audit or []:
        seconds, memory = au.audit.seconds, au.memory
        if not (au.budget_size and seconds):
            continue
        gib = None if memory is None else memory / 2**30
        if au.shape == "controllers":
            judge("snapshot 5k nodes + 100k pods, wall", seconds, AUDIT_BUDGET_SECONDS, " s")
            if gib is not None:
                judge("snapshot 5k nodes + 100k pods, peak memory", gib, AUDIT_BUDGET_GIB, " GiB")
            compose = next((r.libyaml.seconds for r in report.sizes if r.objects == 10_000), None)
            if compose:
                low, high = (AUDIT_BUDGET_SECONDS / s for s in reversed(REFERENCE_COMPOSE_SECONDS))
                found.append(
                    "  snapshot 5k nodes + 100k pods, wall / libyaml compose of 10,000 objects "
                    f"(same run, any host; no verdict): {seconds / compose:.2f}x, where the "
                    f"budget on its reference machine is {low:.2f}-{high:.2f}x"
                )
        else:  # the worst case: how far it is from the budget, without a verdict
            found.append(
                f"  snapshot 5k nodes + 100k pods, {SHAPES[au.shape]} (no verdict): "
                f"wall {seconds:.2f} s = {seconds / AUDIT_BUDGET_SECONDS:.2f}x the budget"
                + (
                    ""
                    if gib is None
                    else f", peak memory {gib:.2f} GiB = {gib / AUDIT_BUDGET_GIB:.2f}x"
                )
            )
    pools = [p for p in report.pools or [] if p.poolgate.seconds]
    if len(pools) >= 2:
        smallest, largest = pools[0], pools[-1]
        growth = (largest.poolgate.seconds or 0) / (smallest.poolgate.seconds or 1)
        found.append(
            f"  pools x workloads {smallest.pools:,} -> {largest.pools:,}: seconds "
            f"x{growth:.2f} for x{largest.pools / smallest.pools:.2f} the objects "
            "(start-up included; no verdict)"
        )
    ck = report.checkov
    if ck and ck.get("seconds") and ck.get("poolgate_seconds"):
        judge("vs Checkov on 1,000 objects", ck["seconds"] / ck["poolgate_seconds"], 15, "x", False)
    timed = [r for r in report.sizes if r.poolgate.seconds and r.libyaml.seconds]
    if len(timed) >= 2:
        first, last = timed[0], timed[-1]
        pg = (
            (last.poolgate.seconds or 0)
            / last.objects
            / ((first.poolgate.seconds or 1) / first.objects)
        )
        ly = (
            (last.libyaml.seconds or 0)
            / last.objects
            / ((first.libyaml.seconds or 1) / first.objects)
        )
        found.append(
            f"  growth {first.objects:,} -> {last.objects:,}: seconds per object x{pg:.2f} "
            f"for poolgate, x{ly:.2f} for libyaml (1.00 = linear)"
        )
    return found or ["  (nothing measured that has a budget line)"]


def to_json(report: Report) -> dict[str, Any]:
    data = asdict(report)
    for size, raw in zip(report.sizes, data["sizes"], strict=True):
        for tool in ("read", "libyaml", "poolgate"):
            raw[tool]["median"] = getattr(size, tool).seconds
    if report.one_file is not None:
        data["one_file"]["median"] = report.one_file.seconds
    if report.one_file_cold is not None:
        data["one_file_cold"]["median"] = report.one_file_cold.seconds
    if report.one_file_against is not None:
        data["one_file_against"]["median"] = report.one_file_against.seconds
    for result, raw in zip(report.audit or [], data["audit"] or [], strict=True):
        raw["audit"]["median"] = result.audit.seconds
    for pools, raw in zip(report.pools or [], data["pools"] or [], strict=True):
        raw["poolgate"]["median"] = pools.poolgate.seconds
        if pools.against is not None:
            raw["against"]["median"] = pools.against.seconds
    return data


# ---- command line -----------------------------------------------------------


def _sizes(text: str) -> list[int]:
    try:
        sizes = [int(part.replace("_", "")) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a list of integers: {text!r}") from None
    if not sizes or min(sizes) < 1:
        raise argparse.ArgumentTypeError("sizes must be positive integers")
    return sizes


def _snapshot(text: str) -> tuple[int, int]:
    try:
        nodes, pods = (int(x) for x in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected NODESxPODS, got {text!r}") from None
    return nodes, pods


def _shapes(text: str) -> list[str]:
    if text == "both":
        return list(SHAPES)
    if text not in SHAPES:
        raise argparse.ArgumentTypeError(f"expected controllers, unique or both, got {text!r}")
    return [text]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks",
        description="Measure poolgate against the read and libyaml floors (docs/performance.md).",
    )
    parser.add_argument(
        "--quick", action="store_true", help="sizes 1,000 and 2,000, 2 repeats, snapshots 500x10000"
    )
    parser.add_argument("--sizes", type=_sizes, help="comma-separated object counts")
    parser.add_argument("--repeats", type=int, help="runs per measurement (median reported)")
    parser.add_argument("--seed", type=int, default=7, help="corpus seed (default 7)")
    parser.add_argument("--keep", type=Path, help="write inputs under DIR and keep them")
    parser.add_argument("--json", type=Path, help="also write the results as JSON to FILE")
    parser.add_argument(
        "--snapshot", type=_snapshot, help="audit snapshot size as NODESxPODS (default 5000x100000)"
    )
    parser.add_argument(
        "--snapshot-shape",
        dest="snapshot_shapes",
        type=_shapes,
        default=list(SHAPES),
        metavar="controllers|unique|both",
        help="pods under controllers in the snapshot (the budget line), every pod its own "
        "template with owners absent (the worst case), or both (default)",
    )
    parser.add_argument("--timeout", type=float, default=900, help="seconds per run (default 900)")
    parser.add_argument(
        "--pools",
        type=_sizes,
        help="pools x workloads counts: N NodePools with N Deployments (default 1000,4000)",
    )
    parser.add_argument(
        "--against",
        type=Path,
        metavar="CHECKOUT",
        help="also time the one-file and pools x workloads scans and the HTML report with "
        "the poolgate of another checkout (a directory holding scanner/), alternating with "
        "this one",
    )
    parser.add_argument("--no-corpus", dest="corpus", action="store_false")
    parser.add_argument("--no-one-file", dest="one_file", action="store_false")
    parser.add_argument("--no-checkov", dest="checkov", action="store_false")
    parser.add_argument("--no-audit", dest="audit", action="store_false")
    parser.add_argument("--no-pools", dest="pools_run", action="store_false")
    parser.add_argument("--no-html", dest="html", action="store_false")
    parser.add_argument(
        "--html-findings",
        type=int,
        default=10_000,
        help="findings in the generated HTML report (default 10000)",
    )
    args = parser.parse_args(argv)
    if args.sizes is None:
        args.sizes = list(QUICK_SIZES if args.quick else FULL_SIZES)
    if args.repeats is None:
        args.repeats = QUICK_REPEATS if args.quick else FULL_REPEATS
    if args.repeats < 1:
        parser.error("--repeats must be >= 1")
    if args.snapshot is None:
        args.snapshot = QUICK_SNAPSHOT if args.quick else FULL_SNAPSHOT
    if not args.pools_run:
        args.pools = []
    elif args.pools is None:
        args.pools = list(QUICK_POOLS if args.quick else FULL_POOLS)
    if args.against is not None:
        args.against = args.against.resolve()
        if not (args.against / "scanner" / "__main__.py").is_file():
            parser.error(f"--against {args.against}: no scanner/__main__.py there")
    if args.keep is not None:
        args.keep = args.keep.resolve()
    return args


def main(argv: list[str] | None = None) -> int:
    """Run the benchmarks; exit 1 when poolgate is missing or a run failed."""
    args = parse_args(argv)

    def say(*parts: object, end: str = "\n") -> None:
        print(*parts, end=end, file=sys.stderr, flush=True)

    report = run(args, say)
    print(format_report(report))
    if args.json is not None:
        args.json.write_text(json.dumps(to_json(report), indent=2) + "\n", encoding="utf-8")
    return 1 if report.failed else 0
