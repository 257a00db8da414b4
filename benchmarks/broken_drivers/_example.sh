#!/usr/bin/env bash
# A DRA driver broken on purpose, for the driver suite's break-it runs: sigs.k8s.io/dra-example-
# driver's kubelet plugin (its path first, then its flags), run with one misbehaviour. Each
# broken-*.sh sets BROKEN and execs this. Every instance gets the same E2E_DRA_PLUGIN_DIR, so
# the number of starts survives a restart there. Run one as a driver of its own, beside the real
# ones (the example binary is cached by any run with the default drivers):
#   bin=~/.cache/e2e-dra/programs/dra-example-kubeletplugin-v0.4.0/bin/dra-example-kubeletplugin
#   E2E_DRA_DRIVERS="upstream,example,command:benchmarks/broken_drivers/broken-NAME.sh $bin \
#     --kubeconfig={kubeconfig} --node-name={node} --cdi-root={cdi_dir} --num-devices=4 \
#     --kubelet-registrar-directory-path={registry_dir} --kubelet-plugins-directory-path={plugins_dir} \
#     --driver-name={driver} --pod-uid={pod_uid}" ./run.sh pytest e2e_dra -k drivers
set -euo pipefail
binary="$1"; shift
starts_file="$E2E_DRA_PLUGIN_DIR/.broken-starts"
mkdir -p "$E2E_DRA_PLUGIN_DIR"
starts=$(( $(cat "$starts_file" 2>/dev/null || echo 0) + 1 ))
echo "$starts" >"$starts_file"
echo "broken driver ($BROKEN), start $starts" >&2
case "$BROKEN" in
  more-devices-after-restart)  # enumerates one more device each time it starts
    exec "$binary" "$@" --num-devices=$((3 + starts)) ;;
  fails-on-restart)  # cannot read what its predecessor left (a checkpoint of another format)
    if [ "$starts" -gt 1 ]; then
      echo "Error: unable to sync from checkpoint: unknown checkpoint version" >&2
      exit 1
    fi
    exec "$binary" "$@" ;;
  other-name)  # serves under a name of its own, not the one it was given
    exec "$binary" "$@" --driver-name=other.example.com ;;
  cdi-elsewhere)  # writes its CDI specs where the container runtime does not look
    exec "$binary" "$@" --cdi-root="$E2E_DRA_PLUGIN_DIR/cdi" ;;
  removes-others-sockets)  # clears the registration sockets of every other instance at start
    rm -f "$E2E_DRA_REGISTRY_DIR/$E2E_DRA_DRIVER"-*-reg.sock
    exec "$binary" "$@" ;;
  *) echo "unknown BROKEN=$BROKEN" >&2; exit 2 ;;
esac
