"""poolgate benchmarks: corpus and snapshot generators and the runner.

Run ``python -m benchmarks`` (full) or ``python -m benchmarks --quick``.
"""
