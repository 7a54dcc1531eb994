"""Suite-wide setup: nothing the tests run may write into the checkout or the user's home.

poolgate remembers validated rule files in a cache directory (scanner/ruleset/cache.py);
tests that fake ``HOME`` would otherwise create ``.cache/`` inside the repository.
Every test and every subprocess it starts inherits this one temporary cache.
"""

from __future__ import annotations

import os
import tempfile

if "POOLGATE_CACHE_DIR" not in os.environ:
    os.environ["POOLGATE_CACHE_DIR"] = tempfile.mkdtemp(prefix="poolgate-test-cache-")
