"""pool-name-field-selector-fallback: the driver's ResourceSlice controller (told to reconcile
only one pool) keeps working against a release whose API server rejects the
``spec.pool.name`` field selector: it must fall back to filtering locally.

Proof, in every phase: delete the pool's slice and see the controller publish a new one (a
different UID). The pool is cluster-wide, so the driver uses the admin client (node-scoped
admission refuses cluster-wide slices).

Then the controller's way of listing must match the server: narrowed by the server where the
server accepts the field selector, filtered locally where it rejects it. A phase whose server
accepts it had no fallback to take; it says so (``nothing_to_prove``), and the kind of list each
phase used is a fact of the run (``pool_selector/<phase>``). 1.37 and 1.38 both accept it, so
only a pair with an older server exercises the fallback.
"""

from __future__ import annotations

from collections.abc import Sequence

from e2e_dra.builder import KubeError
from e2e_dra.driver import Pool
from e2e_dra.subtest import Context, Subtest
from e2e_dra.subtest_kit import every_phase
from e2e_dra.waits import eventually

POOL = "pool-name-field-selector-fallback"
RECREATE_TIMEOUT = 300.0


def resources(nodes: Sequence[str]) -> list[Pool]:
    return [Pool(POOL, [{"devices": [{"name": "device-00"}]}], all_nodes=True)]


def recreate(ctx: Context) -> None:
    """Delete the pool's only slice; the controller must publish a new one."""
    old = _the_slice(ctx, f"driver {ctx.driver.name} to publish pool {POOL}")
    ctx.builder.delete("resourceslices", old["metadata"]["name"])
    _the_slice(
        ctx,
        f"driver {ctx.driver.name} to re-publish pool {POOL}",
        other_than=old["metadata"]["uid"],
    )
    with ctx.step("the controller lists the pool the way this API server allows"):
        narrows = _server_narrows_by_pool(ctx)
        used = ctx.driver.pool_selector
        ctx.facts[f"pool_selector/{ctx.phase}"] = _FACT[used]
        assert used is narrows, (
            f"driver {ctx.driver.name} listed pool {POOL} "
            f"{_HOW[used]}, but the API server "
            f"{'accepts' if narrows else 'rejects'} the spec.pool.name field selector"
        )
    if narrows:
        ctx.nothing_to_prove(
            "the API server accepts the spec.pool.name field selector: no fallback to take"
        )


_FACT = {True: "server", False: "fallback", None: "not listed"}
_HOW = {
    True: "through the spec.pool.name field selector",
    False: "filtering it locally",
    None: "not at all since the API server started",
}


def _server_narrows_by_pool(ctx: Context) -> bool:
    """Whether the API server accepts a ResourceSlice list narrowed by ``spec.pool.name``."""
    try:
        ctx.builder.list("resourceslices", fieldSelector=f"spec.pool.name={POOL}")
    except KubeError as exc:
        if exc.status != 400:
            raise
        return False
    return True


def _the_slice(ctx: Context, what: str, other_than: str | None = None) -> dict:
    def matches(slices: list[dict]) -> bool:
        return (
            len(slices) == 1
            and _is_expected(slices[0], ctx.driver.name)
            and slices[0]["metadata"]["uid"] != other_than
        )

    return eventually(ctx.driver.slices, what=what, timeout=RECREATE_TIMEOUT, until=matches)[0]


def _is_expected(slice_: dict, driver: str) -> bool:
    spec = slice_.get("spec", {})
    return (
        spec.get("driver") == driver
        and spec.get("nodeName") is None
        and spec.get("allNodes") is True
        and spec.get("pool", {}).get("name") == POOL
        and spec.get("pool", {}).get("resourceSliceCount") == 1
        and spec.get("devices") == [{"name": "device-00"}]
    )


SUBTEST = Subtest(
    name="pool-name-field-selector-fallback",
    keps=(4381,),
    initial=every_phase(recreate),
    resources=resources,
    privileged_client=True,
    reconcile_pool=POOL,
)
