"""poolgate: policy-as-code compliance scanner for GPU Kubernetes platforms."""

from __future__ import annotations

__version__ = "0.1.0"
