"""A baseline's cost follows its size, never the counts it claims (issue 21, item 6).

A 28 KB baseline of 400 entries with ``count: 1000000`` was expanded into 400 million
list items: 206 s and 3.2 GB before the scan began. A pull request may commit the
baseline the job reads, so its counts are input like any other.
"""

from __future__ import annotations

import json
from pathlib import Path

import cli_run
import pytest

from scanner.errors import UsageError
from scanner.findings import baseline

TIMEOUT = 120  # the expanded lists took minutes; reading counts takes a blink
DIGEST = "a" * 64
PRIVILEGED = f"""\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: ml
spec:
  template:
    spec:
      containers:
        - name: main
          image: busybox@sha256:{DIGEST}
          securityContext:
            privileged: true
"""


def _huge_counts(entries: int) -> dict[str, object]:
    return {
        "version": 2,
        "tool": {"name": "poolgate", "version": "0.1.0"},
        "fingerprints": [
            {
                "fingerprint": baseline.in_file(f"{index:032x}", "k8s/a.yaml"),
                "objectFingerprint": f"{index:032x}",
                "uri": "k8s/a.yaml",
                "count": baseline.MAX_COUNT,
            }
            for index in range(entries)
        ],
    }


def test_counts_are_kept_as_counts(tmp_path: Path) -> None:
    path = tmp_path / "b.json"
    path.write_text(json.dumps(_huge_counts(400)))
    assert path.stat().st_size < 64_000
    known = baseline.load(path)
    assert len(known) == 400  # one counter per entry, not one item per counted finding
    assert known.total() == 400 * baseline.MAX_COUNT


def test_a_scan_with_a_baseline_of_huge_counts_finishes_and_hides_only_its_findings(
    tmp_path: Path,
) -> None:
    (tmp_path / ".git").mkdir()
    (tmp_path / "app.yaml").write_text(PRIVILEGED)
    written = cli_run.poolgate(
        "scan", ".", "--write-baseline", "b.json", cwd=tmp_path, timeout=TIMEOUT
    )
    assert written.returncode == 0, written.stderr
    content = json.loads((tmp_path / "b.json").read_text())
    recorded = content["fingerprints"]
    padding = _huge_counts(400)["fingerprints"]
    content["fingerprints"] = [{**entry, "count": baseline.MAX_COUNT} for entry in recorded]
    content["fingerprints"] += padding  # type: ignore[operator]
    (tmp_path / "b.json").write_text(json.dumps(content))
    (tmp_path / "more.yaml").write_text(PRIVILEGED.replace("name: web", "name: api"))

    result = cli_run.poolgate(
        "scan", ".", "--baseline", "b.json", "--format", "json", cwd=tmp_path, timeout=TIMEOUT
    )
    assert result.returncode == 1, result.stderr
    report = json.loads(result.stdout)
    assert [finding["object"]["name"] for finding in report["findings"]] == ["api"]
    assert report["summary"]["baselined"] == len(recorded)


def test_a_baseline_over_the_size_limit_is_a_usage_error_naming_it(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    (tmp_path / "app.yaml").write_text(PRIVILEGED)
    with (tmp_path / "big.json").open("w") as handle:
        handle.write('{"version": 1, "fingerprints": [], "padding": "')
        handle.write("x" * baseline.MAX_SIZE)
        handle.write('"}')
    result = cli_run.poolgate("scan", ".", "--baseline", "big.json", cwd=tmp_path, timeout=TIMEOUT)
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr.startswith("poolgate: error: --baseline big.json: larger than 32 MiB")


@pytest.mark.skipif(not Path("/dev/zero").exists(), reason="needs /dev/zero")
def test_the_size_limit_holds_for_a_file_of_unknown_size(monkeypatch: pytest.MonkeyPatch) -> None:
    """The limit is on the bytes read, not on what ``stat`` says: a device or a pipe
    says 0, and /dev/zero never ends."""
    monkeypatch.setattr(baseline, "MAX_SIZE", 1024)
    with pytest.raises(UsageError, match="--baseline /dev/zero: larger than"):
        baseline.load(Path("/dev/zero"))


@pytest.mark.parametrize("count", [0, -1, baseline.MAX_COUNT + 1, 1.5, True, "7"])
def test_a_count_out_of_range_is_a_usage_error(tmp_path: Path, count: object) -> None:
    path = tmp_path / "b.json"
    entry = {"fingerprint": "a" * 32, "count": count}
    path.write_text(json.dumps({"version": 1, "fingerprints": [entry]}))
    with pytest.raises(UsageError, match=r"b\.json: fingerprints\[0\]\.count must be 1 to"):
        baseline.load(path)
