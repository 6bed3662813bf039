#!/usr/bin/env bash
# Sets everything up, then lints, type-checks and runs the test suite. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --dev
.venv/bin/ruff check kernopt tests bench
.venv/bin/mypy kernopt
exec .venv/bin/python -m pytest -q -ra "$@"
