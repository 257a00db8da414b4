"""What the slice publisher wants in the API, independent of any server."""

from __future__ import annotations

from e2e_dra.driver import Pool, node_devices
from e2e_dra.driver._slices import _contains


def test_node_devices_is_one_pool_named_after_the_node():
    (pool,) = node_devices("node-1", 3)

    assert pool == Pool(
        name="node-1",
        slices=[{"devices": [{"name": "device-00"}, {"name": "device-01"}, {"name": "device-02"}]}],
        node_name="node-1",
    )


def test_server_defaults_do_not_count_as_a_difference():
    wanted = {"devices": [{"name": "d", "taints": [{"key": "k", "effect": "NoSchedule"}]}]}
    stored = {
        "devices": [
            {"name": "d", "taints": [{"key": "k", "effect": "NoSchedule", "timeAdded": "now"}]}
        ],
        "perDeviceNodeSelection": None,
    }

    assert _contains(stored, wanted)


def test_dropped_or_edited_fields_count_as_a_difference():
    wanted = {"devices": [{"name": "d", "attributes": {"x": {"int": 1}}}, {"name": "e"}]}

    assert not _contains({"devices": [{"name": "d"}, {"name": "e"}]}, wanted)  # field dropped
    assert not _contains({"devices": [{"name": "d", "attributes": {"x": {"int": 2}}}]}, wanted)
    assert not _contains({"devices": [{"name": "d", "attributes": {"x": {"int": 1}}}]}, wanted)
