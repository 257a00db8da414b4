#!/usr/bin/env bash
# Runs a command the way the e2e-dra suite expects to be run (after upstream's test/e2e_dra/run.sh):
#   1. makes sure e2e-dra is installed in .venv (created, or updated when pyproject.toml changed);
#   2. resets the host state that a previous cluster leaves behind (CDI specs, plugin sockets,
#      kubelet DRA checkpoints) and hands those directories to the current user;
#   3. exports ARTIFACTS, KUBERNETES_SERVER_CACHE_DIR (and KUBERNETES_SERVER_BIN_DIR when a source
#      checkout with a build is given) defaults;
#   4. execs the command inside the venv.
# Usage: ./run.sh pytest -x e2e_dra | ./run.sh pytest tests | ./run.sh e2e-dra --help
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
[ $# -gt 0 ] || { echo "usage: $0 COMMAND [ARGS...]   (e.g. $0 pytest -x e2e_dra)" >&2; exit 2; }

as_root=()
[ "$(id -u)" -eq 0 ] || as_root=(sudo)

ensure_venv() {
  local venv="${E2E_DRA_VENV:-$here/.venv}" python="${PYTHON:-python3}"
  local stamp="$venv/.e2e-dra-installed" want
  if ! "$python" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
    echo "run.sh: e2e-dra needs Python >= 3.11 ('$python' is $("$python" --version 2>&1))." >&2
    echo "run.sh: install one (e.g. 'apt-get install python3') or set PYTHON=/path/to/python3.11." >&2
    exit 2
  fi
  want="$(cat "$here/pyproject.toml" | sha256sum | cut -c1-64)"
  if [ ! -x "$venv/bin/python" ]; then
    echo "run.sh: creating $venv" >&2
    "$python" -m venv "$venv"
  fi
  if [ "$(cat "$stamp" 2>/dev/null || true)" != "$want" ]; then
    echo "run.sh: installing e2e-dra into $venv" >&2
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --upgrade pip
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check -e "$here[test]"
    echo "$want" >"$stamp"
  fi
  export VIRTUAL_ENV="$venv" PATH="$venv/bin:$PATH"
}

reset_host_state() {
  "${as_root[@]}" rm -rf /var/run/kubernetes /var/run/cdi /var/lib/kubelet/plugins_registry \
    /var/lib/kubelet/plugins /var/lib/kubelet/checkpoints
  "${as_root[@]}" find /var/lib/kubelet -maxdepth 1 -name '*_state' -exec rm -f {} + 2>/dev/null || true
  "${as_root[@]}" mkdir -p /var/run/kubernetes /var/run/cdi /var/lib/kubelet/plugins_registry \
    /var/lib/kubelet/plugins
  "${as_root[@]}" chown "$(id -u):$(id -g)" /var/run/kubernetes /var/run/cdi \
    /var/lib/kubelet/plugins_registry /var/lib/kubelet/plugins
}

ensure_venv
# Another e2e-dra cluster on this host holds the host lock: its certificates, plugin sockets and
# CDI specs live in these directories, so leave them alone.
host_lock="${E2E_DRA_HOST_LOCK:-/tmp/e2e-dra-host.lock}"
if flock -n "$host_lock" true 2>/dev/null; then
  reset_host_state
else
  echo "run.sh: a cluster is running on this host ($host_lock is held): host state left as it is" >&2
fi

export ARTIFACTS="${ARTIFACTS:-/tmp/artifacts}"
mkdir -p "$ARTIFACTS"
export KUBERNETES_SERVER_CACHE_DIR="${KUBERNETES_SERVER_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/e2e-dra/releases}"
if [ -z "${KUBERNETES_SERVER_BIN_DIR:-}" ] && [ -n "${KUBERNETES_SOURCE_DIR:-}" ]; then
  build="$KUBERNETES_SOURCE_DIR/_output/local/bin/linux/$(uname -m | sed 's/x86_64/amd64/;s/aarch64/arm64/')"
  [ -x "$build/kube-apiserver" ] && export KUBERNETES_SERVER_BIN_DIR="$build"
fi

cd "$here"
exec "$@"
