"""Seeded generator of a realistic GPU-platform manifest corpus.

The corpus looks like a platform monorepo: ``team-<x>/namespace.yaml`` holds a
team's Namespaces, default-deny NetworkPolicies, ServiceAccounts and a
ConfigMap; ``team-<x>/<app>/<bundle>.yaml`` files hold 5-10 objects each
(workloads with their Services, ConfigMaps, ServiceAccounts and
NetworkPolicies). Workloads are 60-120 lines like hand-written or rendered
charts: labels, annotations, probes, env, volumes, resources, security
contexts, affinity and tolerations. About a third of them ask for GPUs.

The output depends only on ``objects`` and ``seed``: every random choice
comes from one ``random.Random(seed)`` in a fixed order, and no set or
hash-ordered container is iterated.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from benchmarks import manifests as m
from benchmarks.emit import dump_stream
from benchmarks.manifests import Dice, Obj, Team, words
from benchmarks.workloads import workload

_APP_WORDS = words(
    "api trainer inference embedder tokenizer feature-store gateway indexer scheduler "
    "notebook evaluator serving etl labeler reranker retriever distiller finetune "
    "batch-score vector-db prompt-cache metrics exporter sampler pipeline"
)


class CorpusInfo(NamedTuple):
    """What ``write_corpus`` produced."""

    files: int
    objects: int
    bytes: int


@dataclass
class CorpusFile:
    """One multi-document YAML file of the corpus (path relative to the root)."""

    path: str
    objects: list[Obj] = field(default_factory=list)

    def render(self) -> str:
        return dump_stream(self.objects)


def generate_corpus(objects: int, seed: int = 7) -> Iterator[CorpusFile]:
    """Yield the corpus files, ``objects`` objects in total, deterministically."""
    if objects < 0:
        raise ValueError("objects must be >= 0")
    dice = Dice(seed)
    rng = dice.rng
    remaining = objects
    team_index = 0
    while remaining > 0:
        team = m.team(dice, team_index)
        team_index += 1
        # team-x/namespace.yaml: the namespace-level objects of the team.
        ns_file = CorpusFile(f"{team.name}/namespace.yaml")
        for ns in team.namespaces:
            ns_file.objects.append(m.namespace(dice, team, ns))
            ns_file.objects.append(m.default_deny(ns))
        for sa in team.service_accounts:
            ns_file.objects.append(m.service_account(dice, sa, team.namespaces[0], team))
        ns_file.objects.append(
            m.config_map(dice, f"{team.name}-defaults", team.namespaces[0], team.name)
        )
        del ns_file.objects[remaining:]
        remaining -= len(ns_file.objects)
        yield ns_file

        used_apps: list[str] = []
        for _ in range(rng.randint(3, 8)):
            if remaining <= 0:
                return
            app = dice.pick(_APP_WORDS)
            if app in used_apps:
                app = f"{app}-{len(used_apps)}"
            used_apps.append(app)
            for file_index in range(rng.randint(1, 3)):
                if remaining <= 0:
                    return
                roll = rng.random()
                bundle = "service" if roll < 0.6 else "batch" if roll < 0.92 else "agent"
                size = min(rng.randint(5, 10), remaining)
                ns = team.namespaces[-1] if bundle == "batch" else team.namespaces[0]
                cf = CorpusFile(f"{team.name}/{app}/{bundle}-{file_index}.yaml")
                _fill_bundle(dice, cf.objects, team, ns, app, bundle, file_index, size)
                remaining -= len(cf.objects)
                yield cf


def _fill_bundle(
    dice: Dice,
    out: list[Obj],
    team: Team,
    ns: str,
    app: str,
    bundle: str,
    file_index: int,
    size: int,
) -> None:
    rng = dice.rng
    workloads = max(1, round(size * rng.uniform(0.45, 0.65)))
    i = 0
    while i < workloads and len(out) < size:
        if bundle == "service":
            kind = "StatefulSet" if dice.chance(0.3) else "Deployment"
        elif bundle == "batch":
            kind = "CronJob" if dice.chance(0.5) else "Job"
        else:
            kind = "DaemonSet" if dice.chance(0.7) else "Deployment"
        name = f"{app}-{kind.lower()}-{file_index}-{i}"
        i += 1
        out.append(workload(dice, team, ns, app, name, kind))
        if len(out) < size and kind in ("Deployment", "StatefulSet") and dice.chance(0.6):
            out.append(m.service(dice, name, ns, app, 8080, headless=kind == "StatefulSet"))
    extra = 0
    while len(out) < size:
        what = dice.pick(("ConfigMap", "ConfigMap", "ConfigMap", "NetworkPolicy", "ServiceAccount"))
        name = f"{app}-{what.lower()}-{file_index}-{extra}"
        extra += 1
        if what == "ConfigMap":
            first = extra == 1 and file_index == 0
            out.append(m.config_map(dice, f"{app}-config" if first else name, ns, app))
        elif what == "NetworkPolicy":
            out.append(m.allow_policy(name, ns, app, 8080))
        else:
            out.append(m.service_account(dice, name, ns, team))


def write_corpus(root: Path, objects: int, seed: int = 7) -> CorpusInfo:
    """Write the corpus under ``root`` (created if missing) and say what was written."""
    root.mkdir(parents=True, exist_ok=True)
    files = count = size = 0
    for cf in generate_corpus(objects, seed):
        path = root / cf.path
        path.parent.mkdir(parents=True, exist_ok=True)
        data = cf.render().encode("utf-8")
        path.write_bytes(data)
        files += 1
        count += len(cf.objects)
        size += len(data)
    return CorpusInfo(files, count, size)
