"""Each container sees the requests of its claims it names, all of a claim it names whole, and
nothing else (``containers[].resources.claims``), judged on the env lines drivers write."""

from __future__ import annotations

from e2e_dra.builder._views import container_views


def _container(name: str, *claims: tuple[str, str | None]) -> dict:
    named = [{"name": c} if r is None else {"name": c, "request": r} for c, r in claims]
    return {"name": name, "resources": {"claims": named}}


def _pod(*containers: dict, template: bool = False) -> dict:
    pod: dict = {
        "metadata": {"name": "p"},
        "spec": {"containers": list(containers), "resourceClaims": [{"name": "pc"}]},
        "status": {},
    }
    if template:
        pod["status"]["resourceClaimStatuses"] = [{"name": "pc", "resourceClaimName": "c-x1"}]
    else:
        pod["spec"]["resourceClaims"][0]["resourceClaimName"] = "c-x1"
    return pod


def _claim(*requests: str) -> dict:
    results = [{"request": r, "driver": "d", "pool": "p", "device": f"dev-{r}"} for r in requests]
    return {"status": {"allocation": {"devices": {"results": results}}}}


CLAIMS = {"c-x1": _claim("a", "b")}
A, B = "claim_c_x1_a=true", "claim_c_x1_b=true"
POD = _pod(
    _container("both", ("pc", "a"), ("pc", "b")),
    _container("only-a", ("pc", "a")),
    _container("whole", ("pc", None)),
    _container("none"),
)


def _env(**lines: list[str]) -> dict[str, str]:
    return {
        name: "\n".join(["PATH=/bin", *each, "user_a=b"]) + "\n" for name, each in lines.items()
    }


def test_each_container_seeing_what_it_names_is_no_problem() -> None:
    env = _env(both=[A, B], only_a=[A], whole=[B, A], none=[])
    env["only-a"] = env.pop("only_a")
    assert container_views(POD, CLAIMS, env) == []
    assert container_views(_pod(*POD["spec"]["containers"], template=True), CLAIMS, env) == []


def test_a_container_naming_two_requests_that_sees_one_is_a_problem() -> None:
    env = _env(both=[B], whole=[A, B], none=[])
    env["only-a"] = A + "\n"
    (problem,) = container_views(POD, CLAIMS, env)
    assert "container both of pod p names ['a', 'b'] of claim c-x1" in problem
    assert "sees the devices of requests ['b'], not of ['a', 'b']" in problem


def test_a_container_seeing_what_it_does_not_name_is_a_problem() -> None:
    env = _env(both=[A, B], whole=[A, B], none=[A])
    env["only-a"] = f"{A}\n{B}\n"
    problems = container_views(POD, CLAIMS, env)
    assert len(problems) == 2
    assert any(
        "container only-a" in p and "requests ['a', 'b'], not of ['a']" in p for p in problems
    )
    assert any("container none of pod p names none of it" in p for p in problems)


def test_a_request_no_container_shows_is_a_driver_that_writes_no_lines() -> None:
    env = _env(both=[], whole=[], none=[])
    env["only-a"] = ""
    assert container_views(POD, CLAIMS, env) == []
    subrequest = {"c-x1": _claim("a/first", "b")}  # a subrequest shows as its request
    env = _env(both=[A, B], whole=[A, B], none=[])
    env["only-a"] = A
    assert container_views(POD, subrequest, env) == []


def test_a_pods_claims_are_named_by_its_spec_or_made_from_its_templates() -> None:
    from e2e_dra.builder._views import claim_names

    pod = _pod(template=True)
    pod["spec"]["resourceClaims"].append({"name": "direct", "resourceClaimName": "d"})
    pod["spec"]["resourceClaims"].append({"name": "not-made", "resourceClaimTemplateName": "t"})
    assert claim_names(pod) == {"pc": "c-x1", "direct": "d"}
