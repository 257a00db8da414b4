"""Shared by extended-resource-explicit and -implicit (DRAExtendedResource) and by the
gate-cycle subtest extended-resource.

A pod asks for an extended resource (``resources.requests``) instead of a claim; the scheduler
creates a "special" ResourceClaim owned by the pod and records it in
``pod.status.extendedResourceClaimStatus``. Both pods (created before and after the upgrade)
must keep running with their claims through the downgrade, and the claims must be garbage
collected with their pods.

In the upgrade/downgrade subtests, "keep running" means untouched, checked first thing after
each restart: the same pod, its container neither restarted nor replaced, the special claim it
got when it started still reserved for it and the driver's env for that claim still in its
container (``subtest_kit.still_untouched``).
"""

from __future__ import annotations

from e2e_dra.builder import (
    IMPLICIT_EXTENDED_RESOURCE_PREFIX,
    POD_START_TIMEOUT,
    NotFound,
    is_allocated,
)
from e2e_dra.subtest import Context, Phase, Subtest
from e2e_dra.subtest_kit import (
    Running,
    devices_per_node,
    older_writes_hold,
    running,
    still_untouched,
)
from e2e_dra.waits import eventually

CLAIMS_GONE_TIMEOUT = 180.0
# The driver sets claim_<claim>_<request>=true; the scheduler names the request of a special
# claim container-0-request-0, so this substring proves the device was prepared for the pod.
REQUEST_ENV = "container_0_request_0=true"


def extended_resource_subtest(kind: str) -> Subtest:
    """The subtest ``extended-resource-<kind>``; ``kind`` is "explicit" or "implicit"."""

    def initial(ctx: Context) -> Phase:
        resource = resource_name(ctx, kind)
        before = create_pod(ctx, f"{kind}-before-upgrade", resource)
        verify_pod_running_with_claim(ctx, before, resource)
        started = [started_with_claim(ctx, before)]

        def after_upgrade(ctx: Context) -> Phase:
            with ctx.step(f"pod {before} runs untouched"):
                still_untouched_with_claims(ctx, started)
            verify_pod_running_with_claim(ctx, before, resource)
            after = create_pod(ctx, f"{kind}-after-upgrade", resource)
            verify_pod_running_with_claim(ctx, after, resource)
            started.append(started_with_claim(ctx, after))

            def after_downgrade(ctx: Context) -> Phase:
                with ctx.step(f"pods {before} and {after} run untouched"):
                    still_untouched_with_claims(ctx, started)
                pods = (before, after)
                for pod in pods:
                    verify_pod_running_with_claim(ctx, pod, resource)
                claims = [claim_name_from_pod(ctx, pod) for pod in pods]
                for pod in pods:
                    ctx.builder.delete_pod_and_wait(pod)
                wait_claims_gone(ctx, claims)
                return older_writes_hold

            return after_downgrade

        return after_upgrade

    return Subtest(
        name=f"extended-resource-{kind}",
        keps=(5004,),
        initial=initial,
        resources=devices_per_node(8),
    )


def resource_name(ctx: Context, kind: str) -> str:
    """Explicit: a new class maps ``<driver>/resource-explicit``; implicit: the default class
    is reachable as ``deviceclass.resource.kubernetes.io/<class>`` without any setup."""
    b = ctx.builder
    if kind == "implicit":
        return IMPLICIT_EXTENDED_RESOURCE_PREFIX + b.class_name()
    resource = b.extended_resource_name("explicit")
    created = b.create(b.class_with_extended_resource(resource))[0]
    assert created["spec"].get("extendedResourceName") == resource, (
        f"DeviceClass {created['metadata']['name']} lost spec.extendedResourceName: "
        "is the DRAExtendedResource feature gate on?"
    )
    return resource


def create_pod(ctx: Context, name: str, resource: str) -> str:
    b = ctx.builder
    pod = b.pod()
    pod["metadata"]["name"] = name
    pod["spec"]["containers"][0]["resources"] = {
        "requests": {resource: "1"},
        "limits": {resource: "1"},
    }
    b.create(pod)
    return name


def verify_pod_running_with_claim(ctx: Context, name: str, resource: str) -> None:
    """Running with the driver's env, and a special claim that is allocated and maps ``resource``.

    The run+exec check is retried as a whole: right after a node restart, exec can fail with
    "unable to upgrade connection: pod does not exist" for a pod the API reports as Running.
    """
    b = ctx.builder

    def running_with_env() -> bool:
        b.test_pod(b.read_pod(name), env=(REQUEST_ENV,))
        return True

    eventually(
        running_with_env,
        what=f"pod {name} running with {REQUEST_ENV} in its env",
        timeout=POD_START_TIMEOUT,
    )
    status = b.read_pod(name).get("status", {}).get("extendedResourceClaimStatus")
    assert status, f"pod {name} has no status.extendedResourceClaimStatus"
    claim_name = status["resourceClaimName"]
    claim = b.get("resourceclaims", claim_name)
    assert is_allocated(claim), f"ResourceClaim {claim_name} of pod {name} is not allocated"
    # As upstream checks: the scheduler makes the claim for the pod, which controls it (so the
    # garbage collector removes it with the pod, and nothing else may take it).
    uid = b.read_pod(name)["metadata"]["uid"]
    owners = [
        (o.get("kind"), o.get("name"), o.get("uid"), o.get("controller"))
        for o in claim["metadata"].get("ownerReferences") or []
    ]
    assert owners == [("Pod", name, uid, True)], (
        f"ResourceClaim {claim_name} of pod {name} must be controlled by that pod alone "
        f"(uid {uid}); ownerReferences (kind, name, uid, controller): {owners}"
    )
    mapped = [m.get("resourceName") for m in status.get("requestMappings", [])]
    assert resource in mapped, f"pod {name}: requestMappings {mapped} lack {resource}"


def started_with_claim(ctx: Context, pod: str) -> tuple[Running, str]:
    """The pod as it runs now, and the special claim the scheduler made for it."""
    return running(ctx.builder, pod), claim_name_from_pod(ctx, pod)


def still_untouched_with_claims(ctx: Context, started: list[tuple[Running, str]]) -> None:
    """Each pod runs as it did when it started, its special claim still reserved for it and the
    driver's line for that claim's request still in its env."""
    for was, claim_name in started:
        still_untouched(ctx.builder, was, [claim_name], env=(REQUEST_ENV,))


def claim_name_from_pod(ctx: Context, pod: str) -> str:
    status = ctx.builder.read_pod(pod).get("status", {}).get("extendedResourceClaimStatus")
    assert status, f"pod {pod} has no status.extendedResourceClaimStatus"
    return status["resourceClaimName"]


def wait_claims_gone(ctx: Context, names: list[str]) -> None:
    """The garbage collector removes special claims once their pods are gone."""

    def remaining() -> list[str]:
        left = []
        for name in names:
            try:
                ctx.builder.get("resourceclaims", name)
                left.append(name)
            except NotFound:
                pass
        return left

    eventually(
        remaining,
        what=f"special ResourceClaims {names} to be garbage-collected",
        timeout=CLAIMS_GONE_TIMEOUT,
        until=lambda left: not left,
    )
