#!/usr/bin/env bash
# Sets everything up, then runs the test suite. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --dev
exec .venv/bin/python -m pytest -q -ra "$@"
