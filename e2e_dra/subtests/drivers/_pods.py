"""A pod with a claim the real driver prepared: made, seen running, and seeing its device as the
driver's CDI spec for the claim sets it (not as e2e-dra's own plugin would set it). A kubelet that
keeps failing to prepare the claim is said in its own words, not as a pod that never ran."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import yaml

from e2e_dra.builder import Builder, request
from e2e_dra.driver import DriverError, ProcessDriver
from e2e_dra.subtest import Context
from e2e_dra.subtest_kit import fits_and_runs
from e2e_dra.subtests.drivers._kubelet import PREPARE_ERROR, REFUSALS, kubelet_said, log_size
from e2e_dra.subtests.drivers._pools import device_set, published
from e2e_dra.waits import WaitTimeout


@dataclass(frozen=True)
class Claimed:
    """A running pod with one claim, as the driver prepared it."""

    pod: dict  # as created
    claim: str  # the claim's name
    uid: str
    env: tuple[str, ...]  # what the driver's CDI spec for the claim sets
    instance: int  # which of the driver's instances prepared it

    @property
    def name(self) -> str:
        return str(self.pod["metadata"]["name"])


def claim_spec(b: Builder, count: int | None = None) -> dict:
    """``count`` devices (one by default) of the subtest's class, with no config: a real driver
    defines its own configuration format, which a driver-agnostic check cannot know."""
    spec = b.claim_spec(None if count is None else [request(count=count)])
    spec["devices"].pop("config", None)
    return spec


def claimed_pod(
    ctx: Context,
    b: Builder,
    driver: ProcessDriver,
    *,
    template: bool = True,
    refusals: int | None = None,
    count: int | None = None,
) -> Claimed:
    """A pod with a claim of ``count`` devices (from a template, or its own), running and seeing
    its device; the kubelet failing ``refusals`` times to prepare it fails it (see
    :func:`prepared_and_runs`)."""
    if template:
        pod, claim_template = b.pod_inline()
        claim_template["spec"]["spec"] = claim_spec(b, count)
        b.create(claim_template, pod)
    else:
        claim = b.external_claim()
        claim["spec"] = claim_spec(b, count)
        pod = b.pod_external(claim["metadata"]["name"])
        b.create(claim, pod)
    return runs_with_device(ctx, b, driver, pod, refusals)


def runs_with_device(
    ctx: Context, b: Builder, driver: ProcessDriver, pod: dict, refusals: int | None = None
) -> Claimed:
    """``pod`` runs (an unschedulable verdict fails at once), its claim is allocated from the
    driver's devices, and its containers see what the driver's CDI spec for that claim sets
    (not what e2e-dra's plugin would set)."""
    prepared_and_runs(ctx, b, driver, pod, refusals or REFUSALS)
    claim = claim_of(b, pod)
    allocated_from_driver(claim, driver)
    uid = claim["metadata"]["uid"]
    env = device_env(ctx, driver, uid)
    for container in pod["spec"]["containers"]:
        b.check_container_env(pod["metadata"]["name"], container["name"], env)
    return Claimed(pod, claim["metadata"]["name"], uid, env, driver.instance)


def prepared_and_runs(
    ctx: Context, b: Builder, driver: ProcessDriver, pod: dict, refusals: int
) -> None:
    """``pod`` runs; a pod whose claim the kubelet keeps failing to prepare is said in the
    kubelet's words (``refusals`` failures, or the last one when the wait ends), not as a pod
    that never ran."""
    name = pod["metadata"]["name"]
    log = ctx.logs.get("kubelet")
    start = log_size(log)
    pod_ref = f'pod="{pod["metadata"].get("namespace", b.namespace)}/{name}"'

    def refused() -> list[str]:
        return kubelet_said(log, start, PREPARE_ERROR, pod_ref) if log is not None else []

    def said(failures: list[str]) -> DriverError:
        return DriverError(
            f"driver {driver.name} does not prepare the claim of pod {name}: the kubelet logged "
            f"{len(failures)} failure(s) since the pod was created, the last: {failures[-1]}"
        )

    def watched() -> None:
        if len(failures := refused()) >= refusals:
            raise said(failures)

    try:
        fits_and_runs(b, pod, env=(), watch=watched)
    except WaitTimeout:
        if failures := refused():
            raise said(failures) from None
        raise


def claim_of(b: Builder, pod: dict) -> dict:
    """The ResourceClaim the pod's first claim resolved to."""
    name = pod["metadata"]["name"]
    now = b.read_pod(name)
    ref = pod["spec"]["resourceClaims"][0]
    claim_name = ref.get("resourceClaimName")
    if claim_name is None:
        statuses = now.get("status", {}).get("resourceClaimStatuses") or []
        claim_name = next((s.get("resourceClaimName") for s in statuses), None)
    assert claim_name, f"pod {name}: no ResourceClaim in its status"
    return b.get("resourceclaims", claim_name)


def allocated_from_driver(claim: dict, driver: ProcessDriver) -> None:
    """The claim's allocation names devices the driver published, on its node."""
    results = ((claim.get("status") or {}).get("allocation") or {}).get("devices", {})
    results = results.get("results") or []
    name = claim["metadata"]["name"]
    assert results, f"ResourceClaim {name} runs a pod but has no allocated device"
    publishes = device_set(published(driver))
    for result in results:
        where = (result.get("pool"), result.get("device"))
        assert result.get("driver") == driver.name and where in publishes, (
            f"ResourceClaim {name} was allocated {result}, which driver {driver.name} does not "
            f"publish on node {driver.node_name}"
        )


def device_env(ctx: Context, driver: ProcessDriver, uid: str) -> tuple[str, ...]:
    """What the driver's CDI specs for claim ``uid`` put into a container's environment."""
    specs = [f for f in driver.files_naming(uid) if f.is_relative_to(driver.cdi_dir)]
    env = tuple(line for spec in specs for line in _cdi_env(spec))
    if not env:
        why = f"no CDI spec under {driver.cdi_dir} for claim {uid} sets an environment variable"
        if driver.kind.writes_cdi:
            raise AssertionError(f"driver {driver.name} prepared the claim, but {why}")
        ctx.nothing_to_prove(f"the pod's view of its device: {why}")
    return env


def _cdi_env(spec_file: Path) -> list[str]:
    text = spec_file.read_text()
    spec = json.loads(text) if spec_file.suffix == ".json" else yaml.safe_load(text)
    edits = [spec.get("containerEdits") or {}]
    edits += [d.get("containerEdits") or {} for d in spec.get("devices") or []]
    return [line for edit in edits for line in edit.get("env") or []]
