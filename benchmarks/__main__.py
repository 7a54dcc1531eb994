"""``python -m benchmarks [--quick]``: see benchmarks/README.md."""

from __future__ import annotations

from benchmarks.run import main

if __name__ == "__main__":
    raise SystemExit(main())
