"""FEATURE_GATES filtering: what the binaries' --help says decides which gates are passed on."""

from __future__ import annotations

import pytest

from e2e_dra._suite._gates import choose_gates, settable_gates

APISERVER_HELP = """
      --feature-gates colonSeparatedMultimapStringString
                A set of key=value pairs that describe feature gates. Options are:
                kube:AllAlpha=true|false (ALPHA - default=false)
                kube:DRAPartitionableDevices=true|false (BETA - default=true)
                kube:DRAWorkloadResourceClaims=true|false (ALPHA - default=false)
                kube:OldThing=true|false (DEPRECATED - default=false)
      --goaway-chance float
"""
KUBELET_HELP = """
      --feature-gates mapStringBool
                APIResponseCompression=true|false (BETA - default=true)
                DRAPartitionableDevices=true|false (BETA - default=true)
"""


def test_help_lists_settable_gates_with_or_without_component_prefix() -> None:
    assert settable_gates(APISERVER_HELP) == {
        "AllAlpha": "ALPHA",
        "DRAPartitionableDevices": "BETA",
        "DRAWorkloadResourceClaims": "ALPHA",
        "OldThing": "DEPRECATED",
    }
    assert set(settable_gates(KUBELET_HELP)) == {
        "APIResponseCompression",
        "DRAPartitionableDevices",
    }


def test_gates_not_settable_everywhere_are_dropped_with_the_binary_named() -> None:
    accepted = {
        "old/kube-apiserver": frozenset(settable_gates(APISERVER_HELP)),
        "old/kubelet": frozenset(settable_gates(KUBELET_HELP)),
    }

    choice = choose_gates(
        "DRAPartitionableDevices=true,DRAWorkloadResourceClaims=true,DRAExtendedResource=true",
        accepted,
    )

    assert choice.flag_value == "DRAPartitionableDevices=true"
    assert set(choice.dropped) == {"DRAWorkloadResourceClaims", "DRAExtendedResource"}
    assert "old/kubelet" in choice.dropped["DRAWorkloadResourceClaims"]
    assert "old/kube-apiserver" not in choice.dropped["DRAWorkloadResourceClaims"]


def test_a_malformed_gate_is_an_error_naming_feature_gates() -> None:
    with pytest.raises(Exception, match="FEATURE_GATES"):
        choose_gates("DRAPartitionableDevices", {})
