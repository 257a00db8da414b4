"""What each container of a pod may see of its claims: the requests it names, and no other.

The API says so in ``containers[].resources.claims``: an entry names one of the pod's claims
and, with ``request``, one request of it; "if empty, everything from the claim is made
available, otherwise only the result of this request" (KEP-4381). The kubelet hands a
container the CDI devices of exactly those results, and nothing of a claim it does not name
(KEP-3063). Drivers that spell each prepared request into the container's environment, as
``claim_<claim>_<request>=true`` (upstream's test driver, and ours: ``claim_env_name``), make
that visible: each container's ``env`` must hold the line of every request it names, of every
request of a claim it names whole, and the line of no other request of the pod's claims.

A request whose line shows in no container is one whose driver does not write them (the example
driver): it is not judged here, so a pod that shows a wrong view names each request in a second
container too. Only the pod's own ``resourceClaims`` count (a claim
made for an extended resource is not named by any container).
"""

from __future__ import annotations

from collections.abc import Mapping

from e2e_dra.driver import claim_env_name


def _base(request: str) -> str:
    return request.split("/", 1)[0]  # a subrequest's result is its parent request's


def claim_names(pod: dict) -> dict[str, str]:
    """The ResourceClaim each of the pod's claims is (pod's name for it -> the claim's name): the
    claim it names, or the one made from its template (``status.resourceClaimStatuses``); a
    claim not made yet is left out."""
    names = {
        c["name"]: c["resourceClaimName"]
        for c in pod["spec"].get("resourceClaims") or []
        if c.get("resourceClaimName")
    }
    for status in (pod.get("status") or {}).get("resourceClaimStatuses") or []:
        if status.get("resourceClaimName"):
            names[status["name"]] = status["resourceClaimName"]
    return names


def container_views(pod: dict, claims: Mapping[str, dict], env: Mapping[str, str]) -> list[str]:
    """What breaks the rule above in ``pod`` (as read, with its status), whose claims are
    ``claims`` (by their names) and whose containers printed ``env`` (by container name)."""
    by_pod_name = claim_names(pod)
    lines = {name: set(text.splitlines()) for name, text in env.items()}
    problems = []
    for claim_name in sorted(set(by_pod_name.values())):
        claim = claims.get(claim_name)
        if claim is None:
            continue
        allocation = (claim.get("status") or {}).get("allocation") or {}
        results = (allocation.get("devices") or {}).get("results") or []
        line = {
            r: f"{claim_env_name(claim_name, r)}=true"
            for r in {_base(str(r.get("request", ""))) for r in results}
        }
        # A request no container shows is one whose driver writes no such line.
        requests = sorted(r for r in line if any(line[r] in seen for seen in lines.values()))
        for container in pod["spec"].get("containers") or []:
            if container["name"] not in lines:
                continue
            named = [
                each.get("request")
                for each in (container.get("resources") or {}).get("claims") or []
                if by_pod_name.get(each.get("name")) == claim_name
            ]
            wanted = set(requests) if any(not r for r in named) else {_base(r) for r in named}
            seen = {r for r in requests if line[r] in lines[container["name"]]}
            if seen != wanted & set(requests):
                said = f"names {sorted(named, key=str)}" if named else "names none of it"
                problems.append(
                    f"container {container['name']} of pod {pod['metadata']['name']} "
                    f"{said} of claim {claim_name} (requests {requests}) and sees the "
                    f"devices of requests {sorted(seen)}, not of {sorted(wanted & set(requests))}"
                    " (a container sees the requests it names, all of a claim it names whole, "
                    "nothing else)"
                )
    return problems
