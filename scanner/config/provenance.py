"""Which policy a run used and where it came from: the record every report carries.

A verdict depends on the manifests and on the policy: the configuration, the user
rule files (``ruleDirs``, ``--rules``) and the baseline. In a pull request the
author can change all of them, so a report that says "passed" must also say under
which policy, in a form a reviewer can check: the file, its source (a git commit
with ``--policy-ref``, the work tree, an explicit ``--config``, or the built-in
defaults) and the SHA-256 of its bytes. Every reporter writes this record; the
shape is ``PolicyRecord.as_json``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

GIT_REF: Final = "git-ref"
"""Read from a git commit (``--policy-ref``)."""
WORK_TREE: Final = "work-tree"
"""``.poolgate.yaml`` discovered in the files on disk."""
EXPLICIT: Final = "explicit"
"""``--config FILE`` read from the file system."""
DEFAULTS: Final = "defaults"
"""No config file: the built-in defaults (the full security floor)."""
FILE: Final = "file"
"""A rule file or baseline read from the file system."""


@dataclass(frozen=True, slots=True)
class PolicyFile:
    """A rule file or baseline the run used."""

    path: str
    """Repository-relative (POSIX) inside the repository, else absolute."""
    sha256: str
    source: str
    """``git-ref`` or ``file``."""

    def as_json(self) -> dict[str, str]:
        return {"path": self.path, "source": self.source, "sha256": self.sha256}


@dataclass(frozen=True, slots=True)
class PolicyChange:
    """A policy file whose work-tree version differs from the commit's."""

    path: str
    change: str
    """``added`` (only in the work tree), ``removed`` (only in the commit) or ``changed``."""


@dataclass(frozen=True, slots=True)
class Comparison:
    """The work tree's policy files compared with a commit's (``--policy-ref`` or
    ``--compare-policy``)."""

    ref: str
    commit: str
    changes: tuple[PolicyChange, ...] = ()


@dataclass(frozen=True, slots=True)
class PolicyRecord:
    """The configuration a run used, its rule files and baseline, with digests."""

    source: str
    """``git-ref``, ``work-tree``, ``explicit`` or ``defaults``."""
    path: str = ""
    """The config file; empty for the built-in defaults."""
    sha256: str = ""
    """SHA-256 of the config file's bytes; empty for the built-in defaults."""
    ref: str = ""
    """With ``--policy-ref``: the revision as given, and the commit it named."""
    commit: str = ""
    rule_files: tuple[PolicyFile, ...] = ()
    """User rule files (``ruleDirs``, ``--rules``); bundled rules come with the version."""
    baseline: PolicyFile | None = None
    compared: Comparison | None = None

    def as_json(self) -> dict[str, Any]:
        """The record in JSON and SARIF reports (``config`` / ``poolgateConfig``)."""
        compared = self.compared
        return {
            "path": self.path or None,
            "source": self.source,
            "ref": self.ref or None,
            "commit": self.commit or None,
            "sha256": self.sha256 or None,
            "ruleFiles": [item.as_json() for item in self.rule_files],
            "baseline": self.baseline.as_json() if self.baseline is not None else None,
            "workTreeChanges": None
            if compared is None
            else {
                "ref": compared.ref,
                "commit": compared.commit,
                "files": [{"path": item.path, "change": item.change} for item in compared.changes],
            },
        }

    def summary(self) -> str:
        """One line for text reports (paths unescaped: the reporter escapes them)."""
        at = revision(self.ref, self.commit) if self.commit else ""
        if not self.path:
            where = f"no .poolgate.yaml in {at}" if at else "no .poolgate.yaml found"
            line = f"config: built-in defaults ({where})"
        else:
            origin = {
                GIT_REF: f"from {at}",
                WORK_TREE: "(work tree)",
                EXPLICIT: "(--config)",
            }.get(self.source, f"({self.source})")
            line = f"config: {self.path} {origin}, sha256 {self.sha256}"
        parts = [line]
        if self.rule_files:
            count = len(self.rule_files)
            parts.append(f"{count} rule file{'' if count == 1 else 's'}")
        if self.baseline is not None:
            parts.append(f"baseline {self.baseline.path}, sha256 {self.baseline.sha256}")
        if self.compared is not None and self.compared.changes:
            count = len(self.compared.changes)
            parts.append(
                f"{count} policy file{' differs' if count == 1 else 's differ'} from "
                f"{revision(self.compared.ref, self.compared.commit)} in the work tree"
            )
        return "; ".join(parts)


def revision(ref: str, commit: str) -> str:
    """A commit as messages name it: ``main (commit 0123456789ab)``, or only
    ``commit 0123456789ab`` when it was given by its id."""
    short = f"commit {commit[:12]}"
    return short if commit.startswith(ref) and len(ref) >= 7 else f"{ref} ({short})"
