"""prioritized-list: a request with ``firstAvailable`` subrequests (DRAPrioritizedList) is
allocated to the first subrequest that fits, and that choice survives upgrade and downgrade.

The claim's one request lists four subrequests: ``unmatched`` (a CEL selector no device of the
driver matches), ``too-many`` (more devices than the node has), ``preferred`` (two devices) and
``fallback`` (any one device). Both of the last two can be satisfied, so an allocator that takes
the last fitting subrequest, or any one, is told apart from one that takes the first: the
scheduler must skip the first two and allocate two devices for ``my-request/preferred`` (as
upstream's test, which makes two subrequests satisfiable and expects the first). In every phase a
new claim is allocated the same way, and every claim made so far (its pod running untouched) must
still say ``my-request/preferred`` with the same devices, read through every API version both
releases serve: v1, v1beta2, and v1beta1 where it is still served (before 1.38). The subrequests
live in the spec and the chosen one in ``status.allocation.devices.results[].request``, so each
version must carry both through its conversion.

A second claim, made in every phase too, scopes opaque config and a constraint to subrequests
(upstream's "uses the config for the selected subrequest" and "chooses the correct subrequest
subject to constraints"). Its request ``config-request`` lists ``constrained``, ``fits`` and
``also-fits``, one device each; a ``matchAttribute`` constraint names
``config-request/constrained`` alone and asks for an attribute no device of the driver has, so
that subrequest, and only it, cannot be satisfied. A second request, ``other-request``, wants one
device. Config entries name the whole claim, each request, and each subrequest
(``"requests": ["config-request/fits"]``), each subrequest's with parameters of its own. The
scheduler must pass over ``constrained`` and allocate ``config-request/fits`` and
``other-request``, copying into the allocation only the config that applies to them. The pod
has one container per request (``resources.claims[].request``), and each must see exactly the
driver env of its own request: the config of ``config-request`` and of ``fits`` in the one, that
of ``other-request`` in the other, nothing of the subrequests passed over. A constraint applied
to the whole request leaves the claim unallocated; one ignored lets ``constrained`` win; a driver
that applies a config to a device it does not name shows it in the wrong container.

These claims cross the restarts both ways: each pod runs untouched with the same env, each claim
keeps its allocation and config through every served version, and a new pod shares the claim
made in the phase before: after the upgrade one allocated and prepared before it, after the
downgrade one allocated (and, unless a staged upgrade left the kubelet behind, prepared) by the
newer release, which the older kubelet must now hand to a new pod. At the end, once every pod is
gone, the kubelet that runs then must have had the driver unprepare every claim, whichever
kubelet prepared it.

Every pod stays to the end, so the node needs the devices of three claims of each kind:
3 x (2 + 2) = 12 (``DEVICES``).

Gates: DRAPrioritizedList is beta and on by default from 1.34, GA in 1.36 and locked on in 1.37
(to be removed in 1.40). Nothing needs to be set; naming the gate in FEATURE_GATES would only
break the subtest once a release no longer knows it. Releases without the v1 API (< 1.34) are
excluded.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass
from typing import Any

from e2e_dra.builder import DEFAULT_PARAMETERS, Builder, request, retrying
from e2e_dra.builder import RESOURCE_V1 as V1
from e2e_dra.driver import GRPCCall
from e2e_dra.subtest import Context, Phase, Subtest
from e2e_dra.subtest_kit import (
    CLAIMS_VERSIONS,
    Running,
    claim_and_pod,
    devices_per_node,
    older_writes_hold,
    request_env,
    running,
    still_untouched,
)
from e2e_dra.subtest_kit import RESOURCE_V1BETA2 as V1BETA2
from e2e_dra.waits import eventually

REQUEST = "my-request"
UNMATCHED = "unmatched"
TOO_MANY = "too-many"
PREFERRED = "preferred"
PREFERRED_COUNT = 2
FALLBACK = "fallback"
SUBREQUESTS = (UNMATCHED, TOO_MANY, PREFERRED, FALLBACK)
CHOSEN = f"{REQUEST}/{PREFERRED}"
# The test driver publishes devices without attributes: no device has this one.
NO_DEVICE = 'device.attributes["example.com"].?model.orValue("") == "no-such-model"'

CONFIG_REQUEST = "config-request"
CONSTRAINED = "constrained"
FITS = "fits"
ALSO_FITS = "also-fits"
CONFIG_SUBREQUESTS = (CONSTRAINED, FITS, ALSO_FITS)
OTHER_REQUEST = "other-request"
CONFIGURED = f"{CONFIG_REQUEST}/{FITS}"
CONFIGURED_REQUESTS = (CONFIGURED, OTHER_REQUEST)
"""What the allocation results of a configured claim name, in order (one device each)."""
# No device of the test driver has this attribute: a matchAttribute constraint on it cannot be
# met by any device of the requests (or subrequests) it names, and binds no other.
NO_ATTRIBUTE = "dra.example.com/model"
CONSTRAINT = {"requests": [f"{CONFIG_REQUEST}/{CONSTRAINED}"], "matchAttribute": NO_ATTRIBUTE}

Config = tuple[tuple[str, ...], dict[str, str]]
"""(the requests a config entry names, none meaning all; its opaque parameters)."""
REQUEST_PARAMETERS = {r: {"request": r} for r in (CONFIG_REQUEST, OTHER_REQUEST)}
SUBREQUEST_PARAMETERS = {s: {"subrequest": s} for s in CONFIG_SUBREQUESTS}
CLAIM_CONFIG: tuple[Config, ...] = (
    ((), dict(DEFAULT_PARAMETERS)),
    ((CONFIG_REQUEST,), REQUEST_PARAMETERS[CONFIG_REQUEST]),
    *(((f"{CONFIG_REQUEST}/{s}",), SUBREQUEST_PARAMETERS[s]) for s in CONFIG_SUBREQUESTS),
    ((OTHER_REQUEST,), REQUEST_PARAMETERS[OTHER_REQUEST]),
)
"""The config of a configured claim, in order. Both requests' entries set ``request`` and every
subrequest's sets ``subrequest``, so an entry applied to a device it does not name shows as a
wrong value (the later entry wins), not only as a line too many."""
PASSED_OVER = {f"{CONFIG_REQUEST}/{s}" for s in CONFIG_SUBREQUESTS} - {CONFIGURED}
ALLOCATED_CONFIG = tuple(c for c in CLAIM_CONFIG if not PASSED_OVER & set(c[0]))
"""The config the scheduler copies into the allocation: every entry but those that name only a
subrequest it did not choose."""

CLAIMS_PER_KIND = 3  # one of each kind per phase; every pod stays to the end of the last one
DEVICES = CLAIMS_PER_KIND * (PREFERRED_COUNT + len(CONFIGURED_REQUESTS))
UNPREPARE_TIMEOUT = 60.0
# The lines of ``env`` that the test driver sets (upstream's envLineRE).
DRIVER_ENV = re.compile(r"(?:admin|user|claim)_[a-zA-Z0-9_]*=.*")

Result = tuple[str, str, str, str]
"""(request, driver, pool, device) of one allocation result."""
Allocated = tuple[Running, str, list[Result]]
"""(its pod as it ran, claim, allocation results) of one claim this subtest made."""


@dataclass(frozen=True)
class Allocation:
    """What a configured claim was allocated: the results and the config copied for them."""

    results: tuple[Result, ...]
    config: tuple[Config, ...]


@dataclass
class Configured:
    """A configured claim, its allocation as first read, and the pods sharing it, as they ran."""

    claim: str
    allocation: Allocation
    pods: list[Running]


def prioritized_claim(b: Builder) -> dict:
    """A claim whose only request can be satisfied by its last two subrequests; the first of
    them must win."""
    subrequests = [
        request(UNMATCHED, selectors=[NO_DEVICE]),
        request(TOO_MANY, allocation_mode="ExactCount", count=DEVICES + 1),
        request(PREFERRED, allocation_mode="ExactCount", count=PREFERRED_COUNT),
        request(FALLBACK),
    ]
    return b.external_claim(requests=[request(REQUEST, first_available=subrequests)])


def configured_claim(b: Builder) -> dict:
    """A claim with a config entry per request and per subrequest and a constraint that rules
    out its first subrequest alone: ``config-request/fits`` and ``other-request`` must be
    allocated, with the config that names them."""
    subrequests = [request(s) for s in CONFIG_SUBREQUESTS]
    claim = b.external_claim(
        requests=[request(CONFIG_REQUEST, first_available=subrequests), request(OTHER_REQUEST)]
    )
    devices = claim["spec"]["devices"]
    devices["constraints"] = [copy.deepcopy(CONSTRAINT)]
    devices["config"] = [_config(b, requests, parameters) for requests, parameters in CLAIM_CONFIG]
    return claim


def _config(b: Builder, requests: tuple[str, ...], parameters: dict[str, str]) -> dict:
    config: dict[str, Any] = {"opaque": {"driver": b.driver_name, "parameters": dict(parameters)}}
    if requests:
        config["requests"] = list(requests)
    return config


def configured_pod(b: Builder, claim_name: str) -> dict:
    """A pod that uses ``claim_name`` with one container per request, named after it and given
    only that request's devices (``resources.claims[].request``)."""
    pod = b.pod_external(claim_name)
    (container,) = pod["spec"]["containers"]
    (pod_claim,) = container["resources"]["claims"]
    pod["spec"]["containers"] = [
        {
            **copy.deepcopy(container),
            "name": name,
            "resources": {"claims": [{"name": pod_claim["name"], "request": name}]},
        }
        for name in (CONFIG_REQUEST, OTHER_REQUEST)
    ]
    return pod


def configured_env(claim_name: str) -> dict[str, list[str]]:
    """By container (named after its request): the driver env it must see, exactly, sorted. Its
    request's marker (``claim_<claim>_<request>=true``), the config of the whole claim and of its
    request, and in ``config-request``'s that of ``fits``; nothing of ``constrained``,
    ``also-fits`` or the other request."""
    everyone = [f"user_{k}={v}" for k, v in DEFAULT_PARAMETERS.items()]
    return {
        CONFIG_REQUEST: sorted(
            [
                request_env(claim_name, CONFIG_REQUEST),
                *everyone,
                f"user_request={CONFIG_REQUEST}",
                f"user_subrequest={FITS}",
            ]
        ),
        OTHER_REQUEST: sorted(
            [
                request_env(claim_name, OTHER_REQUEST),
                *everyone,
                f"user_request={OTHER_REQUEST}",
            ]
        ),
    }


def driver_env(env_output: str) -> list[str]:
    """The lines of ``env`` output that the test driver sets, sorted."""
    return sorted(line for line in env_output.splitlines() if DRIVER_ENV.fullmatch(line))


def initial(ctx: Context) -> Phase:
    first = _new_claim_and_pod(ctx)
    configured_first = _new_configured(ctx)

    def after_upgrade(ctx: Context) -> Phase:
        _still_allocated(ctx, [first])
        _still_configured(ctx, [configured_first])
        second = _new_claim_and_pod(ctx)
        _share(ctx, configured_first)
        configured_second = _new_configured(ctx)

        def after_downgrade(ctx: Context) -> Phase:
            _still_allocated(ctx, [first, second])
            _still_configured(ctx, [configured_first, configured_second])
            third = _new_claim_and_pod(ctx)
            _share(ctx, configured_second)
            configured_third = _new_configured(ctx)
            _delete(
                ctx, [first, second, third], [configured_first, configured_second, configured_third]
            )
            return older_writes_hold

        return after_downgrade

    return after_upgrade


def _new_claim_and_pod(ctx: Context) -> Allocated:
    b = ctx.builder
    claim, pod = claim_and_pod(b, prioritized_claim(b))
    with ctx.step(f"allocate {claim['metadata']['name']} to its first fitting subrequest"):
        b.create(claim, pod)
        b.test_pod(pod)
        results = _results_at_every_version(ctx, claim["metadata"]["name"])
    return running(b, pod["metadata"]["name"]), claim["metadata"]["name"], results


def _still_allocated(ctx: Context, allocated: list[Allocated]) -> None:
    """Each pod runs untouched, each claim keeps its allocation, at every served version."""
    b = ctx.builder
    for pod, claim, results in allocated:
        with ctx.step(f"pod {pod.name} runs untouched with {claim} as allocated before"):
            still_untouched(b, pod, [claim])
            now = _results_at_every_version(ctx, claim)
            assert now == results, (
                f"ResourceClaim {claim}: allocation changed since the previous phase: "
                f"was {results}, now {now}"
            )


def _new_configured(ctx: Context) -> Configured:
    """A configured claim and its pod, allocated past the constrained subrequest, each container
    with exactly its own request's config."""
    b = ctx.builder
    claim = configured_claim(b)
    name = claim["metadata"]["name"]
    pod = configured_pod(b, name)
    pod_name = pod["metadata"]["name"]
    with ctx.step(f"allocate {name} to {CONFIGURED}, past {CONFIG_REQUEST}/{CONSTRAINED}"):
        b.create(claim, pod)
        b.wait_running(pod_name)
        allocation = _configured_at_every_version(ctx, name)
    with ctx.step(f"pod {pod_name} sees the config of {CONFIGURED} and nothing else"):
        _check_driver_env(b, pod_name, name)
    return Configured(name, allocation, [running(b, pod_name)])


def _share(ctx: Context, configured: Configured) -> None:
    """A new pod uses the configured claim of the phase before, allocated and prepared before
    the restart: it runs with the same config, and the allocation stays as it was."""
    b = ctx.builder
    pod = configured_pod(b, configured.claim)
    pod_name = pod["metadata"]["name"]
    with ctx.step(f"new pod {pod_name} shares {configured.claim}, allocated in the phase before"):
        uid = retrying(b.get)("resourceclaims", configured.claim)["metadata"]["uid"]
        before = len(_prepare_calls(ctx, uid))
        b.create(pod)
        b.wait_running(pod_name)
        _check_driver_env(b, pod_name, configured.claim)
        now = _configured_at_every_version(ctx, configured.claim)
        assert now == configured.allocation, (
            f"ResourceClaim {configured.claim}: allocation changed when pod {pod_name} came to "
            f"share it: was {configured.allocation}, now {now}"
        )
        # Whether this kubelet asked the driver again or went by its own record of the claim.
        ctx.facts[f"shared_claim_prepare_calls/{ctx.phase}"] = (
            len(_prepare_calls(ctx, uid)) - before
        )
    configured.pods.append(running(b, pod_name))


def _still_configured(ctx: Context, configured: list[Configured]) -> None:
    """Each pod of each configured claim runs untouched and sees the same config; each claim
    keeps its allocation, at every served version."""
    b = ctx.builder
    for entry in configured:
        for pod in entry.pods:
            with ctx.step(f"pod {pod.name} runs untouched, {entry.claim}'s config as before"):
                still_untouched(b, pod, [entry.claim])
                _check_driver_env(b, pod.name, entry.claim)
        with ctx.step(f"{entry.claim} keeps its allocation and config"):
            now = _configured_at_every_version(ctx, entry.claim)
            assert now == entry.allocation, (
                f"ResourceClaim {entry.claim}: allocation changed since the previous phase: "
                f"was {entry.allocation}, now {now}"
            )


def _check_driver_env(b: Builder, pod_name: str, claim_name: str) -> None:
    """Each container of the pod sees exactly the driver env of its own request."""
    for container, want in configured_env(claim_name).items():
        stdout, stderr = retrying(b.exec)(pod_name, container, ["env"])
        assert not stderr, f"env in {pod_name}/{container} wrote to stderr: {stderr!r}"
        seen = driver_env(stdout)
        assert seen == want, (
            f"container {pod_name}/{container} (request {container} of {claim_name}): driver "
            f"env {seen}, want exactly {want}: the config of the whole claim, of its request "
            f"and (for {CONFIG_REQUEST}) of {CONFIGURED}, nothing of {sorted(PASSED_OVER)} or "
            f"of the other request; env output:\n{stdout}"
        )


def _prepare_calls(ctx: Context, uid: str) -> list[GRPCCall]:
    """The kubelet's NodePrepareResources calls to this subtest's driver that named claim
    ``uid``, in any phase so far."""
    return [
        call
        for call in ctx.driver.calls.records
        if call.method.endswith("/NodePrepareResources")
        and any(claim.uid == uid for claim in call.request.claims)
    ]


def _delete(ctx: Context, allocated: list[Allocated], configured: list[Configured]) -> None:
    """Strict deletes (NotFound fails: each was expected to be there): the pods at once, then,
    every pod gone and every claim unprepared, the claims."""
    b = ctx.builder
    pods = [pod.name for pod, _, _ in allocated] + [p.name for c in configured for p in c.pods]
    claims = [claim for _, claim, _ in allocated] + [c.claim for c in configured]
    with ctx.step("delete every pod"):
        for pod_name in pods:
            retrying(b.delete)("pods", pod_name)
        for pod_name in pods:
            b.wait_pod_gone(pod_name)
    with ctx.step("the kubelet had the driver unprepare every claim, whoever prepared it"):
        _unprepared(ctx, claims)
    with ctx.step("delete every claim"):
        for claim in claims:
            retrying(b.delete)("resourceclaims", claim)


def _unprepared(ctx: Context, claims: list[str]) -> None:
    """Until the driver holds none of ``claims`` prepared: no pod uses them any more, so the
    kubelet that runs now must have unprepared each, also those another kubelet prepared."""
    wanted = set(claims)
    eventually(
        lambda: sorted(ref.name for ref in ctx.driver.prepared_claims() if ref.name in wanted),
        what=(
            "the kubelet to have the driver unprepare every claim of the deleted pods "
            "(value: the claims still prepared)"
        ),
        timeout=UNPREPARE_TIMEOUT,
        until=lambda still: not still,
    )


def served_versions(b: Builder) -> list[str]:
    """v1, v1beta2 and the oldest version the release serves (v1beta1 before 1.38), each
    checked to be served (a missing one fails instead of being left out)."""
    oldest = b.api_version_by_release(CLAIMS_VERSIONS, "resourceclaims")
    return [b.api_version(v, "resourceclaims") for v in dict.fromkeys([V1, V1BETA2, oldest])]


def _results_at_every_version(ctx: Context, claim_name: str) -> list[Result]:
    """The claim's allocation results, the same through every served version, with the
    subrequests in the spec and ``my-request/preferred`` chosen."""
    b = ctx.builder
    by_version: dict[str, list[Result]] = {}
    for version in served_versions(b):
        claim = retrying(b.get)("resourceclaims", claim_name, version=version)
        where = f"ResourceClaim {claim_name} read through {version}"
        requests = claim["spec"]["devices"]["requests"]
        names = [[s["name"] for s in r.get("firstAvailable") or []] for r in requests]
        assert names == [list(SUBREQUESTS)], f"{where}: subrequests {names}, want {[SUBREQUESTS]}"
        allocation = (claim.get("status") or {}).get("allocation") or {}
        results = (allocation.get("devices") or {}).get("results") or []
        by_version[version] = [
            (r.get("request"), r.get("driver"), r.get("pool"), r.get("device")) for r in results
        ]
        chosen = [r[0] for r in by_version[version]]
        assert chosen == [CHOSEN] * PREFERRED_COUNT, (
            f"{where}: allocated for {chosen or 'nothing'}, want {PREFERRED_COUNT} devices for "
            f"{CHOSEN}, the first subrequest that can be satisfied ({REQUEST}/{FALLBACK} can be "
            f"too, but comes later); results: {results}"
        )
        drivers = {r[1] for r in by_version[version]}
        assert drivers == {b.driver_name}, f"{where}: results {results}"
    v1 = by_version[V1]
    differ = {version: results for version, results in by_version.items() if results != v1}
    assert not differ, f"ResourceClaim {claim_name}: v1 says {v1}, but {differ}"
    ctx.log(f"ResourceClaim {claim_name}: {v1} through {', '.join(by_version)}")
    return v1


def _configured_at_every_version(ctx: Context, claim_name: str) -> Allocation:
    """The configured claim's allocation, checked and the same through every served version."""
    b = ctx.builder
    by_version = {
        version: configured_allocation(
            retrying(b.get)("resourceclaims", claim_name, version=version),
            b.driver_name,
            f"ResourceClaim {claim_name} read through {version}",
        )
        for version in served_versions(b)
    }
    v1 = by_version[V1]
    differ = {version: found for version, found in by_version.items() if found != v1}
    assert not differ, f"ResourceClaim {claim_name}: v1 says {v1}, but {differ}"
    ctx.log(f"ResourceClaim {claim_name}: {v1.results} through {', '.join(by_version)}")
    return v1


def configured_allocation(claim: dict, driver: str, where: str) -> Allocation:
    """The allocation of a configured claim as the server answered it, checked: the spec still
    scopes config and constraint to subrequests, the results are for ``config-request/fits``
    and ``other-request`` (``where`` names the claim and version in a failure)."""
    devices = claim["spec"]["devices"]
    _check_configured_spec(devices, where)
    allocated = ((claim.get("status") or {}).get("allocation") or {}).get("devices") or {}
    results = tuple(
        (r.get("request"), r.get("driver"), r.get("pool"), r.get("device"))
        for r in allocated.get("results") or []
    )
    requests = [r[0] for r in results]
    assert requests == list(CONFIGURED_REQUESTS), (
        f"{where}: allocated for {requests or 'nothing'}, want {list(CONFIGURED_REQUESTS)}: "
        f"{CONFIG_REQUEST}/{CONSTRAINED} cannot meet its constraint {CONSTRAINT}, which binds "
        f"no other subrequest, and {CONFIGURED} is the next; results: {allocated.get('results')}"
    )
    assert {r[1] for r in results} == {driver}, f"{where}: results {results}"
    entries = allocated.get("config") or []
    assert all(
        e.get("source") == "FromClaim" and (e.get("opaque") or {}).get("driver") == driver
        for e in entries
    ), f"{where}: allocation config {entries}"
    config = _configs(entries)
    assert config == ALLOCATED_CONFIG, (
        f"{where}: allocation config {list(config)}, want {list(ALLOCATED_CONFIG)}: every entry "
        f"of the claim but those that name only {sorted(PASSED_OVER)}"
    )
    return Allocation(results, config)


def _check_configured_spec(devices: dict, where: str) -> None:
    """The spec as sent: requests, subrequests, and config and constraint naming subrequests."""
    subrequests = {
        r["name"]: [s["name"] for s in r.get("firstAvailable") or []]
        for r in devices.get("requests") or []
    }
    want = {CONFIG_REQUEST: list(CONFIG_SUBREQUESTS), OTHER_REQUEST: []}
    assert subrequests == want, f"{where}: (sub)requests {subrequests}, want {want}"
    config = _configs(devices.get("config") or [])
    assert config == CLAIM_CONFIG, f"{where}: config {list(config)}, want {list(CLAIM_CONFIG)}"
    constraints = devices.get("constraints") or []
    assert constraints == [CONSTRAINT], f"{where}: constraints {constraints}, want {[CONSTRAINT]}"


def _configs(entries: list[dict]) -> tuple[Config, ...]:
    """(requests, opaque parameters) of each config entry, in order."""
    return tuple(
        (tuple(e.get("requests") or ()), (e.get("opaque") or {}).get("parameters") or {})
        for e in entries
    )


SUBTEST = Subtest(
    name="prioritized-list",
    keps=(4816,),
    initial=initial,
    resources=devices_per_node(DEVICES),
    requires=(V1, V1BETA2),
    releases=">=1.34",
)
