#!/bin/sh
# Regenerate requirements/action.txt, the GitHub Action's hash-pinned install:
# poolgate's runtime dependencies (pyproject.toml) and its build backend
# (requirements/action.in), resolved once for every platform and Python >= 3.11
# (--universal: markers are kept, cel-expr-python only on its machines), with the
# SHA-256 of every wheel and sdist of each pinned version on PyPI, so one file
# installs on Linux x86-64 and arm64, macOS and Windows alike.
#
#   pip install uv && sh requirements/compile.sh                    # same pins, new files only
#   sh requirements/compile.sh --upgrade                            # newest versions
#   sh requirements/compile.sh --upgrade-package kubernetes         # one package
#
# --no-config and --index-url: the hashes are PyPI's, whatever uv.toml or a mirror says.
set -eu
cd "$(dirname "$0")/.."
exec uv pip compile pyproject.toml requirements/action.in \
  --universal --python-version 3.11 --generate-hashes \
  --no-config --index-url https://pypi.org/simple \
  --custom-compile-command "sh requirements/compile.sh" \
  --output-file requirements/action.txt "$@"
