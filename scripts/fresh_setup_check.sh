#!/usr/bin/env bash
# Proves the README's set-up on a bare machine (issue 16): builds a bare Debian 12 root file system with
# mmdebstrap (only the package mirror is reached), puts a clean clone of this repository in it, runs
# scripts/setup.sh there as root, then
#   1. `kernopt eval tasks/openmp/reduction --candidate <a correct OpenMP reduction>` must say race_check clean;
#   2. clang-19's Polly (the Polly build) compiles a parallel nest into parallel loops;
#   3. with the ThreadSanitizer runtime removed, the same eval must not be a verified ok, and
#      `kernopt doctor` must name the package.
# Usage (root): scripts/fresh_setup_check.sh [WORKDIR]   (default: a new directory under /var/tmp)
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
work=${1:-$(mktemp -d /var/tmp/kernopt-fresh-XXXXXX)}
mkdir -p "$work"
work=$(cd "$work" && pwd)
root="$work/rootfs"
command -v mmdebstrap >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq mmdebstrap >/dev/null; }
start=$(date +%s)
echo "fresh: bootstrapping a bare Debian 12 in $root"
mmdebstrap --variant=minbase --include=ca-certificates,git bookworm "$root" >/dev/null
git clone -q "$repo" "$root/kernopt"
cp /etc/resolv.conf "$root/etc/resolv.conf"
# This machine's way out to the registries (an egress proxy's CA, pip's settings): the network's, not kernopt's.
cp -r /usr/local/share/ca-certificates/. "$root/usr/local/share/ca-certificates/" 2>/dev/null || true
cp /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/ca-certificates.crt"
[ -f /etc/pip.conf ] && cp /etc/pip.conf "$root/etc/pip.conf"
for m in proc sys dev; do mount --rbind "/$m" "$root/$m"; done  # rbind: /dev/shm too (libomp registers itself there)
# The local sandbox picks a private uid per run by locking a file under /run/kernopt-sandbox. The chroot
# shares this machine's processes, so it must share those locks too: with a lock directory of its own it
# took a uid a kernopt run outside was using, and each one's clean-up killed the other's processes.
mkdir -p /run/kernopt-sandbox "$root/run/kernopt-sandbox"
mount --bind /run/kernopt-sandbox "$root/run/kernopt-sandbox"
trap 'for m in run/kernopt-sandbox dev sys proc; do umount -l "$root/$m" 2>/dev/null || true; done' EXIT
cat > "$root/kernopt/reduction_ok.c" <<'C'
#include <math.h>
void reduction(long n, const double *restrict x, double *restrict out) {
    double s = 0.0;
#pragma omp parallel for reduction(+ : s)
    for (long i = 0; i < n; i++) {
        double v = x[i];
        s += sqrt(v) * exp(-0.5 * v) + 0.5 * sin(3.0 * v) + 0.5;
    }
    out[0] = s;
}
C
# Each command runs with the root file system as its root in a mount namespace of its own (pivot_root, not
# chroot): the local sandbox's bubblewrap makes a user namespace, which the kernel refuses to a chrooted process.
run() { unshare --mount --propagation private --fork sh -c '
  set -e; mount --rbind "$1" "$1"; cd "$1"; mkdir -p .host; pivot_root . .host; cd /; umount -l /.host; rmdir /.host
  exec /usr/bin/env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 \
    SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt PIP_CERT=/etc/ssl/certs/ca-certificates.crt sh -c "cd /kernopt && $2"' \
    _ "$root" "$1"; }
echo "fresh: scripts/setup.sh"
run "./scripts/setup.sh" | tail -2
echo "fresh: eval with every gate installed"
run ".venv/bin/kernopt eval tasks/openmp/reduction --candidate reduction_ok.c --sandbox local --json" > "$work/eval1.json" || true
python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print('  status', d['status'], 'race_check', d['race_check']); sys.exit(0 if d['status']=='ok' and d['race_check']=='clean' else 1)" "$work/eval1.json"
echo "fresh: the Polly build (clang-19) emits parallel loops"
run ".venv/bin/python -c 'import sys; sys.path.insert(0, \"bench\"); import peers; p = peers.polly_problem(); print(\"  polly:\", p or \"available\"); sys.exit(p is not None)'"
echo "fresh: the sanitizer runtime removed"
run "apt-get remove -y -qq libclang-rt-14-dev >/dev/null 2>&1; rm -rf /root/.cache/kernopt/doctor"
run ".venv/bin/kernopt eval tasks/openmp/reduction --candidate reduction_ok.c --sandbox local --json" > "$work/eval2.json" 2> "$work/eval2.err" || true
if python3 -c "import json,sys; d=json.load(open(sys.argv[1])); sys.exit(0 if d['status']=='ok' else 1)" "$work/eval2.json" 2>/dev/null; then
  echo "fresh: FAIL: a verified ok without the sanitizer runtime" >&2; exit 1; fi
echo "  eval: $(tail -1 "$work/eval2.err")"
run ".venv/bin/kernopt doctor --sandbox local" > "$work/doctor.txt" || true
cat "$work/doctor.txt" | sed 's/^/  /'
grep -q "libclang-rt-14-dev" "$work/doctor.txt" || { echo "fresh: FAIL: the doctor does not name the package" >&2; exit 1; }
echo "fresh: passed in $(( $(date +%s) - start )) s"
