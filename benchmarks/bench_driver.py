"""Driver figures: prepare/unprepare latency over the socket, and slice wipe -> back time.

    python benchmarks/bench_driver.py [--calls 1000] [--kubeconfig PATH] [--wipes 5]

Latency needs nothing but this package (claims come from a local function, as in the gRPC
tests). The wipe figure needs a running cluster (``--kubeconfig``, or ``$KUBECONFIG``): it deletes
the driver's slices the way the kubelet does on restart and times until the watch put them back.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import grpc

from e2e_dra.driver import Driver, _rpc, node_devices
from e2e_dra.driver._pb import dra_v1_pb2

DRIVER = "bench-driver.k8s.io"


def _percentiles(samples: list[float]) -> str:
    ordered = sorted(samples)
    p50 = statistics.median(ordered)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return f"p50 {p50 * 1000:.2f} ms, p99 {p99 * 1000:.2f} ms, max {ordered[-1] * 1000:.2f} ms"


def bench_latency(calls: int) -> None:
    root = Path(tempfile.mkdtemp(prefix="dra-bench-", dir="/tmp"))
    claims: dict[str, dict] = {}

    def get_claim(namespace: str, name: str) -> dict:
        return claims[name]

    try:
        with Driver(
            DRIVER, "node", None, get_claim=get_claim, kubelet_root=root, cdi_dir=root / "cdi"
        ) as driver:
            stub = _rpc.stub(
                grpc.insecure_channel(f"unix://{driver.dra_socket}"), dra_v1_pb2, "DRAPlugin"
            )
            prepare, unprepare = [], []
            for index in range(calls):
                name, uid = f"claim-{index}", f"uid-{index}"
                claims[name] = _claim(name, uid)
                ref = [dra_v1_pb2.Claim(namespace="default", name=name, uid=uid)]
                started = time.perf_counter()
                answer = stub.NodePrepareResources(
                    dra_v1_pb2.NodePrepareResourcesRequest(claims=ref)
                )
                prepare.append(time.perf_counter() - started)
                assert answer.claims[uid].error == "", answer
                started = time.perf_counter()
                stub.NodeUnprepareResources(dra_v1_pb2.NodeUnprepareResourcesRequest(claims=ref))
                unprepare.append(time.perf_counter() - started)
            assert not list(driver.cdi_dir.glob("*.json"))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(f"NodePrepareResources   ({calls} calls, 1 claim, CDI write): {_percentiles(prepare)}")
    print(f"NodeUnprepareResources ({calls} calls, 1 claim, CDI remove): {_percentiles(unprepare)}")


def _claim(name: str, uid: str) -> dict:
    return {
        "metadata": {"name": name, "namespace": "default", "uid": uid},
        "status": {
            "allocation": {
                "devices": {
                    "results": [
                        {"request": "req", "driver": DRIVER, "pool": "node", "device": "device-00"}
                    ],
                    "config": [
                        {
                            "source": "FromClaim",
                            "opaque": {"driver": DRIVER, "parameters": {"a": "b"}},
                        }
                    ],
                }
            }
        },
    }


def bench_wipe(kubeconfig: Path, wipes: int) -> None:
    from e2e_dra.kube import Kube, path

    kube = Kube.from_kubeconfig(kubeconfig)
    node = kube.list(path("v1", "nodes"))[0]["metadata"]["name"]
    root = Path(tempfile.mkdtemp(prefix="dra-bench-", dir="/tmp"))
    driver = Driver(
        DRIVER,
        node,
        kube,
        resources=node_devices(node, 8),
        kubelet_root=root,  # not the kubelet's: only the API side is measured
        cdi_dir=root / "cdi",
    )
    samples = []
    try:
        driver.start()
        driver.wait_for_slices(timeout=60)
        collection = path(driver.resource_api_version, "resourceslices")
        for _ in range(wipes):
            started = time.perf_counter()
            kube.request("DELETE", collection, query={"fieldSelector": f"spec.driver={DRIVER}"})
            while True:
                slices = driver.slices()
                if len(slices) == driver.expected_slice_count() and all(
                    not s["metadata"].get("deletionTimestamp") for s in slices
                ):
                    break
                time.sleep(0.01)
            samples.append(time.perf_counter() - started)
            time.sleep(0.5)
    finally:
        driver.stop()
        shutil.rmtree(root, ignore_errors=True)
    print(f"slice wipe -> back ({wipes} wipes, node {node}): {_percentiles(samples)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--wipes", type=int, default=5)
    parser.add_argument("--kubeconfig", type=Path, default=os.environ.get("KUBECONFIG"))
    args = parser.parse_args()
    bench_latency(args.calls)
    if args.kubeconfig and Path(args.kubeconfig).is_file():
        bench_wipe(Path(args.kubeconfig), args.wipes)
    else:
        print("slice wipe -> back: skipped (no cluster: pass --kubeconfig)")


if __name__ == "__main__":
    main()
