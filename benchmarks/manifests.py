"""Builders for the namespace-level objects of the benchmark corpus, and the
seeded ``Dice`` every builder draws from.

Each builder takes the ``Dice`` first and returns a plain dict; the order of
calls fixes the output, so a corpus depends only on its seed.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

Obj = dict[str, Any]


def words(text: str) -> tuple[str, ...]:
    return tuple(text.split())


_TEAM_WORDS = words(
    "vision speech ranking search ads llm research robotics fraud recs data maps health "
    "finance video translate safety assist genomics weather ocr audio agents eval"
)

_TRUST_DOMAINS = ("internal", "tenant-a", "tenant-b", "partner-x", "research", "prod-core")

_PSS_LEVELS = ("restricted", "restricted", "restricted", "baseline", "baseline", "privileged")

_REGISTRIES = (
    "us-docker.pkg.dev/acme-ml",
    "ghcr.io/acme",
    "123456789012.dkr.ecr.us-east-1.amazonaws.com",
    "registry.acme.internal",
)

_PUBLIC_IMAGES = (
    "nvcr.io/nvidia/pytorch:24.05-py3",
    "nvcr.io/nvidia/tritonserver:24.05-py3",
    "nvcr.io/nvidia/cuda:12.4.1-runtime-ubuntu22.04",
    "vllm/vllm-openai:v0.5.3",
    "python:3.11-slim",
    "redis:7.2-alpine",
    "envoyproxy/envoy:v1.30.2",
    "busybox:1.36",
)

ENV_NAMES = words(
    "LOG_LEVEL MODEL_NAME MODEL_REVISION BATCH_SIZE MAX_SEQ_LEN NUM_WORKERS CACHE_DIR "
    "OTEL_EXPORTER_OTLP_ENDPOINT OTEL_SERVICE_NAME HF_HOME DATA_BUCKET CHECKPOINT_DIR "
    "REGION FEATURE_FLAGS TIMEOUT_SECONDS GRPC_PORT HTTP_PORT RETRY_LIMIT QUEUE_NAME "
    "SHARD_COUNT NCCL_DEBUG NCCL_SOCKET_IFNAME CUDA_MODULE_LOADING "
    "PYTORCH_CUDA_ALLOC_CONF OMP_NUM_THREADS TOKENIZERS_PARALLELISM WANDB_MODE "
    "TRACE_SAMPLE_RATE READ_TIMEOUT WRITE_TIMEOUT UPSTREAM_URL DB_HOST DB_NAME "
    "DB_POOL_SIZE S3_ENDPOINT TARGET_QPS WARMUP_STEPS"
)

ENV_VALUES = words(
    "info debug llama-3-8b main 32 4096 8 /cache http://otel-collector:4317 /models "
    "gs://acme-ml-data /checkpoints us-central1 beta,fast-path 30 9000 8080 5 jobs-high "
    "16 WARN eth0 LAZY expandable_segments:True 4 false offline 0.05 10s 15s "
    "http://upstream.svc:8080 postgres.db features"
)


@dataclass
class Team:
    """A team: its directory, namespaces, trust domain and service accounts."""

    name: str
    namespaces: list[str]
    trust_domain: str
    service_accounts: list[str]


class Dice:
    """Every random choice of a generator, drawn from one seeded ``random.Random``."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)

    def chance(self, p: float) -> bool:
        return self.rng.random() < p

    def pick(self, seq: tuple[str, ...] | list[str]) -> str:
        return seq[self.rng.randrange(len(seq))]

    def digest(self) -> str:
        return f"sha256:{self.rng.getrandbits(256):064x}"

    def image(self, team: str, app: str) -> str:
        if self.chance(0.25):
            base = self.pick(_PUBLIC_IMAGES)
        else:
            version = (
                f"v{self.rng.randint(0, 3)}.{self.rng.randint(0, 40)}.{self.rng.randint(0, 9)}"
            )
            base = f"{self.pick(_REGISTRIES)}/{team}/{app}:{version}"
        if self.chance(0.5):
            # Digest-pinned, sometimes keeping the tag for readability.
            repo = base.rsplit(":", 1)[0]
            return f"{base if self.chance(0.5) else repo}@{self.digest()}"
        return base

    def quantity(self, scale: tuple[str, ...], at_least: str | None = None) -> str:
        if at_least is None:
            return scale[self.rng.randrange(len(scale) - 2)]
        low = scale.index(at_least)
        return scale[self.rng.randint(low, min(low + 2, len(scale) - 1))]


# ---- teams and namespaces -----------------------------------------
def team(dice: Dice, index: int) -> Team:
    word = _TEAM_WORDS[index % len(_TEAM_WORDS)]
    name = f"team-{word}" if index < len(_TEAM_WORDS) else f"team-{word}-{index}"
    namespaces = [name]
    if dice.chance(0.5):
        namespaces.append(f"{name}-batch")
    sas = [f"{name}-{suffix}" for suffix in ("runtime", "trainer", "ci")[: dice.rng.randint(2, 3)]]
    return Team(name, namespaces, dice.pick(_TRUST_DOMAINS), sas)


def namespace(dice: Dice, team: Team, ns: str) -> Obj:
    labels = {
        "kubernetes.io/metadata.name": ns,
        "team": team.name,
        "poolgate.io/trust-domain": team.trust_domain,
        "pod-security.kubernetes.io/enforce": dice.pick(_PSS_LEVELS),
        "pod-security.kubernetes.io/enforce-version": "latest",
    }
    if dice.chance(0.5):
        labels["pod-security.kubernetes.io/warn"] = "restricted"
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {
            "name": ns,
            "labels": labels,
            "annotations": {
                "poolgate.io/owner": f"{team.name}@acme.example",
                "scheduler.alpha.kubernetes.io/node-selector": "",
            },
        },
    }


def default_deny(ns: str) -> Obj:
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": "default-deny", "namespace": ns},
        "spec": {"podSelector": {}, "policyTypes": ["Ingress", "Egress"]},
    }


def allow_policy(name: str, ns: str, app: str, port: int) -> Obj:
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": name, "namespace": ns, "labels": {"app.kubernetes.io/name": app}},
        "spec": {
            "podSelector": {"matchLabels": {"app.kubernetes.io/name": app}},
            "policyTypes": ["Ingress", "Egress"],
            "ingress": [
                {
                    "from": [
                        {
                            "namespaceSelector": {
                                "matchLabels": {"kubernetes.io/metadata.name": "ingress-gateway"}
                            }
                        },
                        {"podSelector": {"matchLabels": {"app.kubernetes.io/part-of": app}}},
                    ],
                    "ports": [{"protocol": "TCP", "port": port}],
                }
            ],
            "egress": [
                {
                    "to": [{"namespaceSelector": {}}],
                    "ports": [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}],
                },
                {"to": [{"ipBlock": {"cidr": "10.0.0.0/8"}}]},
            ],
        },
    }


def service_account(dice: Dice, name: str, ns: str, team: Team) -> Obj:
    meta: Obj = {"name": name, "namespace": ns, "labels": {"team": team.name}}
    if dice.chance(0.6):
        project = f"acme-{team.name.removeprefix('team-')}"
        meta["annotations"] = {
            "iam.gke.io/gcp-service-account": f"{name}@{project}.iam.gserviceaccount.com"
        }
    obj: Obj = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta}
    if dice.chance(0.3):
        obj["automountServiceAccountToken"] = False
    return obj


def config_map(dice: Dice, name: str, ns: str, app: str) -> Obj:
    data: dict[str, str] = {}
    for key in ("LOG_LEVEL", "REGION", "BATCH_SIZE", "MODEL_NAME")[: dice.rng.randint(1, 4)]:
        data[key] = dice.pick(ENV_VALUES)
    lines = [
        "server:",
        f"  port: {dice.rng.choice((8080, 8000, 9000))}",
        f"  workers: {dice.rng.randint(1, 16)}",
        "  timeouts:",
        f"    read: {dice.rng.randint(5, 60)}s",
        f"    write: {dice.rng.randint(5, 60)}s",
        "model:",
        f"  name: {dice.pick(ENV_VALUES)}",
        f"  revision: {dice.rng.getrandbits(40):010x}",
        f"  max_batch: {dice.rng.choice((8, 16, 32, 64))}",
        "  precision: bf16",
        "logging:",
        "  format: json",
        f"  level: {dice.pick(('info', 'debug', 'warn'))}",
    ]
    for i in range(dice.rng.randint(4, 40)):
        lines.append(f"# tuning knob {i}: {dice.pick(ENV_NAMES).lower()} = {dice.pick(ENV_VALUES)}")
    data["config.yaml"] = "\n".join(lines) + "\n"
    if dice.chance(0.4):
        data["logging.conf"] = (
            "[loggers]\nkeys=root\n\n[handlers]\nkeys=console\n\n"
            "[logger_root]\nlevel=INFO\nhandlers=console\n"
        )
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": ns, "labels": {"app.kubernetes.io/name": app}},
        "data": data,
    }


def service(dice: Dice, name: str, ns: str, app: str, port: int, headless: bool) -> Obj:
    spec: Obj = {
        "type": "ClusterIP",
        "selector": {"app.kubernetes.io/name": app, "app.kubernetes.io/instance": name},
        "ports": [
            {"name": "http", "port": 80, "targetPort": port, "protocol": "TCP"},
            {"name": "metrics", "port": 9090, "targetPort": "metrics", "protocol": "TCP"},
        ],
    }
    if headless:
        spec["clusterIP"] = "None"
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": name,
            "namespace": ns,
            "labels": {"app.kubernetes.io/name": app, "app.kubernetes.io/instance": name},
            "annotations": {"prometheus.io/scrape": "true", "prometheus.io/port": "9090"},
        },
        "spec": spec,
    }
