"""random-worlds without a cluster: worlds drawn again from their seed, and the fit it expects of
the scheduler."""

from __future__ import annotations

import random

from e2e_dra.subtests.random_worlds import Claim, Device, World, _devices, draw


def test_a_seed_draws_the_same_world_again_and_another_seed_another() -> None:
    first = draw(random.Random("7/after-cluster-upgrade/0"), "acu-0")
    assert draw(random.Random("7/after-cluster-upgrade/0"), "acu-0") == first
    others = {draw(random.Random(f"{seed}/after-cluster-upgrade/0"), "acu-0") for seed in range(20)}
    assert len(others) > 10
    assert {d.taint for w in others for d in w.devices} == {None, "k1", "k2"}
    assert any(c.same_numa for w in others for c in w.claims)


def test_a_claim_fits_devices_it_selects_and_tolerates_on_one_numa_node_if_asked() -> None:
    devices = [
        Device("d0", "a", 0, None),
        Device("d1", "a", 1, "k1"),
        Device("d2", "b", 1, None),
        Device("d3", "a", 1, "k2"),
    ]
    assert Claim("c", 1, None, "a", False).fits(devices) == [devices[0]]
    assert Claim("c", 2, None, "a", False).fits(devices) is None  # d1, d3 are tainted
    assert Claim("c", 2, ("k1", "Exists"), "a", False).fits(devices) == devices[:2]
    assert Claim("c", 2, ("k1", "Equal"), "a", True).fits(devices) is None  # numa 0 and 1
    assert Claim("c", 2, ("k2", "Exists"), None, True).fits(devices) == [devices[2], devices[3]]


def test_a_first_available_claim_fits_its_first_choice_that_fits() -> None:
    devices = [Device("d0", "a", 0, None), Device("d1", "b", 1, None), Device("d2", "a", 1, "k1")]
    claim = Claim("c", 0, None, None, False, (("a", 2), (None, 1)))
    assert claim.choices() == [("a", 2), (None, 1)]
    assert claim.fits(devices) == [devices[0]]  # d2 is tainted: two of model a do not fit
    assert claim.fits(devices, 0) is None and claim.fits(devices, 1) == [devices[0]]
    tolerating = Claim("c", 0, ("k1", "Exists"), None, False, (("a", 2), (None, 1)))
    assert tolerating.fits(devices) == [devices[0], devices[2]]


def test_a_worlds_devices_carry_its_name_and_taints_that_predate_its_claims() -> None:
    world = World("acc-0", (Device("d0", "a", 1, "k2"), Device("d1", "b", 0, None)), ())
    tainted, plain = _devices(world)
    assert tainted["attributes"] == {
        "world": {"string": "acc-0"},
        "model": {"string": "a"},
        "numa": {"int": 1},
    }
    (taint,) = tainted["taints"]
    assert (taint["key"], taint["value"], taint["effect"]) == ("k2", "x", "NoSchedule")
    assert taint["timeAdded"].endswith("Z") and "taints" not in plain


def test_each_simpler_world_takes_away_one_thing_and_the_smallest_has_nothing_to_take() -> None:
    from e2e_dra.subtests.random_worlds import _simpler

    world = World(
        "w",
        (Device("d0", "a", 0, "k1"), Device("d1", "b", 1, None)),
        (
            Claim("c0", 2, ("k1", "Exists"), "a", True),
            Claim("c1", 0, None, None, False, (("a", 2), (None, 1))),
        ),
    )
    simpler = list(_simpler(world))

    sizes = [(len(w.devices), len(w.claims)) for w in simpler]
    assert sizes[:4] == [(2, 1), (2, 1), (1, 2), (1, 2)]  # a claim fewer, then a device fewer
    c0 = [w.claims[0] for w in simpler[4:] if w.claims[1] == world.claims[1]]
    assert [(c.toleration, c.model, c.same_numa, c.count) for c in c0] == [
        (None, "a", True, 2),
        (("k1", "Exists"), None, True, 2),
        (("k1", "Exists"), "a", False, 2),
        (("k1", "Exists"), "a", False, 1),
    ]
    both = [w for w in simpler if len(w.claims) == 2 and w.claims[0] == world.claims[0]]
    assert both[-1].claims[1].options == () and both[-1].claims[1].count == 1
    smallest = World("w", (Device("d0", "a", 0, None),), (Claim("c0", 1, None, None, False),))
    assert list(_simpler(smallest)) == []
