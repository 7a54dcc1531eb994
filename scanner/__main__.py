"""``python -m scanner`` runs the poolgate CLI."""

from __future__ import annotations

from scanner.cli import main

if __name__ == "__main__":
    main()
