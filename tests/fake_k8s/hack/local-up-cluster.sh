#!/usr/bin/env bash
# A small stand-in for Kubernetes' hack/local-up-cluster.sh in dry-run mode (-d), used to test the
# localupcluster engine without real Kubernetes. It behaves like the real script where the engine
# can tell: options, "+ VAR=value" traces with KUBE_VERBOSE>=2, certificates and an admin kubeconfig
# in CERT_DIR, "RUN <name>: <command line>" lines in the real order, a CSR-approval loop that runs
# while the engine waits for the kubelet, and both script generations:
#   FAKE_SCRIPT_GENERATION=new (default): etcd is printed as a RUN line, the script exits 0.
#   FAKE_SCRIPT_GENERATION=old: the script starts etcd itself, prints "Local etcd is running..."
#                              and sleeps until it is killed.
# Failure injection: FAKE_SCRIPT_FAIL_AFTER=<component> exits 3 right after that RUN line.
# Binaries: component binaries come from -o DIR; etcd and kubectl from PATH, as in the real one.
# Unlike the real script, RUN lines are printed in the foreground so their order is deterministic.

KUBE_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
KUBE_VERBOSE=${KUBE_VERBOSE:-1}
GENERATION=${FAKE_SCRIPT_GENERATION:-new}

GO_OUT=
DRY_RUN=
while getopts "dho:" OPTION; do
  case ${OPTION} in
    d) echo "skipping running commands"; DRY_RUN=1 ;;
    o) echo "skipping build"; GO_OUT="${OPTARG}"; echo "using source ${GO_OUT}" ;;
    *) echo "usage: $0 -o BIN_DIR -d"; exit 1 ;;
  esac
done
if [[ -z "${DRY_RUN}" || -z "${GO_OUT}" ]]; then
  echo "this fake supports only -o BIN_DIR -d"
  exit 1
fi

set +e
if (( KUBE_VERBOSE >= 2 )); then
  set -x
fi
API_HOST_IP=${API_HOST_IP:-127.0.0.1}
API_SECURE_PORT=${API_SECURE_PORT:-6443}
KCM_SECURE_PORT=${KCM_SECURE_PORT:-10257}
SCHEDULER_SECURE_PORT=${SCHEDULER_SECURE_PORT:-10259}
PROXY_HEALTHZ_PORT=${PROXY_HEALTHZ_PORT:-10256}
KUBELET_HOST=${KUBELET_HOST:-127.0.0.1}
KUBELET_PORT=${KUBELET_PORT:-10250}
ETCD_HOST=${ETCD_HOST:-127.0.0.1}
ETCD_PORT=${ETCD_PORT:-2379}
CERT_DIR=${CERT_DIR:-/var/run/kubernetes}
LOG_DIR=${LOG_DIR:-/tmp}
FEATURE_GATES=${FEATURE_GATES:-AllAlpha=false}
EMULATED_VERSION=${EMULATED_VERSION:-}
CONTROLPLANE_SUDO=${FAKE_CONTROLPLANE_SUDO:-}
TMP_DIR=$(mktemp -d)
if (( KUBE_VERBOSE < 5 )); then
  set +x
fi

function run {
  local what="$1"
  shift 2
  echo "RUN ${what}: ${*}"
  if [[ "${FAKE_SCRIPT_FAIL_AFTER:-}" == "${what}" ]]; then
    echo "fake failure after starting ${what}"
    exit 3
  fi
}

function generate_certs {
  mkdir -p "${CERT_DIR}"
  local ec=(-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes)
  openssl req -x509 "${ec[@]}" -keyout "${CERT_DIR}/ca.key" -out "${CERT_DIR}/ca.crt" \
    -days 1 -subj /CN=fake-ca 2>/dev/null
  local name subject
  for name in serving client-admin; do
    subject=/CN=kube-apiserver
    [[ "${name}" == client-admin ]] && subject="/O=system:masters/CN=admin"
    openssl req "${ec[@]}" -keyout "${CERT_DIR}/${name}.key" -out "${CERT_DIR}/${name}.csr" \
      -subj "${subject}" 2>/dev/null
    openssl x509 -req -in "${CERT_DIR}/${name}.csr" -CA "${CERT_DIR}/ca.crt" \
      -CAkey "${CERT_DIR}/ca.key" -CAcreateserial -out "${CERT_DIR}/${name}.crt" -days 1 \
      -extfile <(printf "subjectAltName=IP:%s,DNS:localhost" "${API_HOST_IP}") 2>/dev/null
  done
  cat >"${CERT_DIR}/admin.kubeconfig" <<KUBECONFIG
apiVersion: v1
kind: Config
clusters:
  - cluster:
      certificate-authority-data: $(base64 -w0 <"${CERT_DIR}/ca.crt")
      server: https://localhost:${API_SECURE_PORT}
    name: local-up-cluster
users:
  - user:
      client-certificate-data: $(base64 -w0 <"${CERT_DIR}/client-admin.crt")
      client-key-data: $(base64 -w0 <"${CERT_DIR}/client-admin.key")
    name: local-up-cluster
contexts:
  - context:
      cluster: local-up-cluster
      user: local-up-cluster
    name: local-up-cluster
current-context: local-up-cluster
KUBECONFIG
  rm -f "${CERT_DIR}/fake-kubelet.csr" "${CERT_DIR}/fake-kubelet.approved"
}

function start_etcd {
  local etcd_dir
  etcd_dir=$(mktemp -d)
  local url="http://${ETCD_HOST}:${ETCD_PORT}"
  local args=(--advertise-client-urls "${url}" --data-dir "${etcd_dir}" --listen-client-urls "${url}"
              --listen-peer-urls http://localhost:0 --log-level=warn)
  if [[ "${GENERATION}" == new ]]; then
    echo "RUN etcd: $(command -v etcd) ${args[*]}"
    return
  fi
  etcd "${args[@]}" >/dev/null 2>&1 &
  echo "Waiting for etcd to come up."
  for _ in $(seq 100); do
    curl -fs "${url}/health" >/dev/null && return
    sleep 0.1
  done
  echo "etcd did not come up"
  exit 1
}

KUBECTL=$(command -v kubectl)
echo "Starting services now!"
start_etcd
generate_certs

priv_arg=""
run kube-apiserver "" ${CONTROLPLANE_SUDO} "${GO_OUT}/kube-apiserver" \
  --authorization-mode=Node,RBAC "${priv_arg}" --v=3 --cert-dir="${CERT_DIR}" \
  --client-ca-file="${CERT_DIR}/ca.crt" --secure-port="${API_SECURE_PORT}" \
  --tls-cert-file="${CERT_DIR}/serving.crt" --tls-private-key-file="${CERT_DIR}/serving.key" \
  --etcd-servers="http://${ETCD_HOST}:${ETCD_PORT}" --feature-gates="${FEATURE_GATES}" \
  --emulated-version="${EMULATED_VERSION}"
run kubectl "" "${KUBECTL}" --kubeconfig "${CERT_DIR}/admin.kubeconfig" create clusterrolebinding \
  kube-apiserver-kubelet-admin --clusterrole=system:kubelet-api-admin --user=kube-apiserver
run kubectl "" "${KUBECTL}" --kubeconfig "${CERT_DIR}/admin.kubeconfig" create clusterrolebinding \
  kubelet-csr --clusterrole=system:certificates.k8s.io:certificatesigningrequests:selfnodeclient \
  --group=system:nodes

run kube-controller-manager "" ${CONTROLPLANE_SUDO} "${GO_OUT}/kube-controller-manager" --v=3 \
  --feature-gates="${FEATURE_GATES}" --emulated-version="${EMULATED_VERSION}" \
  --cert-dir="${CERT_DIR}" --secure-port="${KCM_SECURE_PORT}" --bind-address=0.0.0.0 \
  --master="https://localhost:${API_SECURE_PORT}"

cat >"${TMP_DIR}/kube-scheduler.yaml" <<EOF2
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
EOF2
run kube-scheduler "" ${CONTROLPLANE_SUDO} "${GO_OUT}/kube-scheduler" --v=3 \
  --config="${TMP_DIR}/kube-scheduler.yaml" --feature-gates="${FEATURE_GATES}" \
  --emulated-version="${EMULATED_VERSION}" --cert-dir="${CERT_DIR}" \
  --secure-port="${SCHEDULER_SECURE_PORT}" --bind-address=0.0.0.0 \
  --master="https://localhost:${API_SECURE_PORT}"

cat >"${TMP_DIR}/kubelet.yaml" <<EOF2
kind: KubeletConfiguration
apiVersion: kubelet.config.k8s.io/v1beta1
address: "${KUBELET_HOST}"
port: ${KUBELET_PORT}
tlsCertFile: "${CERT_DIR}/serving.crt"
tlsPrivateKeyFile: "${CERT_DIR}/serving.key"
clientCAFile: "${CERT_DIR}/ca.crt"
fakeCertDir: "${CERT_DIR}"
EOF2
run kubelet "" sudo -E "${GO_OUT}/kubelet" --v=3 --hostname-override=127.0.0.1 \
  --bootstrap-kubeconfig="${CERT_DIR}/kubelet.kubeconfig" \
  --kubeconfig="${CERT_DIR}/kubelet-rotated.kubeconfig" ${KUBELET_FLAGS:-} \
  --config="${TMP_DIR}/kubelet.yaml"

# Like wait_node_csr: approve the kubelet's serving certificate once it asks, while the engine
# is still waiting for the kubelet to become healthy.
for _ in $(seq 600); do
  if [[ -e "${CERT_DIR}/fake-kubelet.csr" ]]; then
    touch "${CERT_DIR}/fake-kubelet.approved"
    echo "kubelet CSR approved"
    break
  fi
  sleep 0.1
done
[[ -e "${CERT_DIR}/fake-kubelet.approved" ]] || { echo "time out on waiting for CSR approval"; exit 1; }

run kube-proxy "" sudo "${GO_OUT}/kube-proxy" --v=3 --config="${TMP_DIR}/kube-proxy.yaml" \
  --healthz-port="${PROXY_HEALTHZ_PORT}" --healthz-bind-address="0.0.0.0:${PROXY_HEALTHZ_PORT}" \
  --master="https://localhost:${API_SECURE_PORT}"

run kubectl "" "${KUBECTL}" --kubeconfig "${CERT_DIR}/admin.kubeconfig" apply -f \
  "${KUBE_ROOT}/cluster/addons/storage-class/local/default.yaml"

if [[ "${GENERATION}" == new ]]; then
  exit 0
fi
echo "Local etcd is running. Run commands. Press Ctrl-C to shut it down."
sleep infinity
