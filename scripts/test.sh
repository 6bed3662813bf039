#!/usr/bin/env bash
# Sets everything up, then lints, type-checks and runs the test suite. Extra arguments go to pytest.
# The Docker sandbox tests need an engine and the sandbox image: this script installs docker.io and
# mmdebstrap, starts dockerd when no engine answers, and builds the image offline when it is missing
# (root or sudo needed). For the remote-engine tests (tests/test_sandbox_remote.py: DOCKER_HOST=ssh://
# through a private sshd on loopback) it also installs openssh-server and the ssh extra (paramiko).
# KERNOPT_DOCKER=0 skips all that (those test files then skip themselves); KERNOPT_REQUIRE_DOCKER=1 (CI)
# makes a failure there fatal instead.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --dev

engine_answers() { .venv/bin/python -c 'from kernopt.sandbox.docker import connect; connect(timeout_s=5)' >/dev/null 2>&1; }

setup_docker() {
  local SUDO="" missing=()
  if [ "$(id -u)" -ne 0 ]; then command -v sudo >/dev/null || { echo "test: need root or sudo for Docker" >&2; return 1; }; SUDO="sudo"; fi
  command -v dockerd >/dev/null || missing+=(docker.io)
  command -v mmdebstrap >/dev/null || missing+=(mmdebstrap)
  { command -v sshd || [ -x /usr/sbin/sshd ]; } >/dev/null || missing+=(openssh-server)
  command -v ssh-keygen >/dev/null || missing+=(openssh-client)
  if [ ${#missing[@]} -gt 0 ]; then
    echo "test: installing ${missing[*]}"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  fi
  if ! engine_answers; then
    echo "test: starting dockerd (log: /var/log/kernopt-dockerd.log)"
    $SUDO sh -c 'nohup dockerd >/var/log/kernopt-dockerd.log 2>&1 &'
    for _ in $(seq 60); do engine_answers && break; sleep 1; done
    engine_answers || { echo "test: dockerd did not come up; see /var/log/kernopt-dockerd.log" >&2; return 1; }
  fi
  .venv/bin/python -c 'import paramiko' 2>/dev/null ||
    .venv/bin/python -m pip install -q --disable-pip-version-check -e ".[dev,ssh]"  # DOCKER_HOST=ssh:// support
  .venv/bin/kernopt sandbox build --offline  # reuses the image when its tag exists
}

if [ "${KERNOPT_DOCKER:-1}" != 0 ] && ! setup_docker; then
  if [ "${KERNOPT_REQUIRE_DOCKER:-0}" = 1 ]; then echo "test: error: the Docker sandbox tests must run here" >&2; exit 1; fi
  echo "test: warning: no Docker engine; tests/test_sandbox_docker.py will be skipped" >&2
fi

# The HTML report's browser tests (tests/test_report.py) open reports in headless Chromium; they skip
# without it, and KERNOPT_REQUIRE_CHROMIUM=1 (CI) makes a missing browser fatal instead.
setup_chromium() {
  command -v chromium >/dev/null && return 0
  local SUDO=""
  if [ "$(id -u)" -ne 0 ]; then command -v sudo >/dev/null || { echo "test: need root or sudo to install chromium" >&2; return 1; }; SUDO="sudo"; fi
  echo "test: installing chromium"
  $SUDO apt-get update -qq || return 1
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends chromium >/dev/null || return 1
}

if ! setup_chromium; then
  if [ "${KERNOPT_REQUIRE_CHROMIUM:-0}" = 1 ]; then echo "test: error: the report's browser tests need chromium" >&2; exit 1; fi
  echo "test: warning: no chromium; the browser checks in tests/test_report.py will be skipped" >&2
fi

.venv/bin/ruff check kernopt tests bench
.venv/bin/mypy kernopt
exec .venv/bin/python -m pytest -q -ra "$@"
