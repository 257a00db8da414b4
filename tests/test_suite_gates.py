"""FEATURE_GATES filtering: each release's kube-apiserver decides which gates it accepts."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from fake_k8s.gate_validator import fake_release

from e2e_dra._suite._gates import choose_gates
from e2e_dra.localupcluster import ClusterError, culprit, refusal


@pytest.mark.parametrize(
    ("message", "gate"),
    [
        ('E1129 run.go:72] "command failed" err="unrecognized feature gate: NoSuch"', "NoSuch"),
        (
            'err="cannot set feature gate DRADeviceTaints to false, feature is locked to true"',
            "DRADeviceTaints",
        ),
        (
            'err="DRAWorkloadResourceClaims is enabled, but depends on features that are disabled: '
            '[GenericWorkload]"',
            "DRAWorkloadResourceClaims",
        ),
        ("flag provided but not defined: -feature-gates", None),
    ],
)
def test_the_refused_gate_is_read_from_the_message(message: str, gate: str | None) -> None:
    assert culprit(message) == gate


def test_gates_a_release_refuses_are_dropped_with_the_binary_and_reason(tmp_path: Path) -> None:
    old = fake_release(tmp_path, "v1.36.5", known="DRADeviceTaints DRAExtendedResource")
    new = fake_release(tmp_path, "v1.37.2", known="DRADeviceTaints DRAExtendedResource NewGate")

    choice = choose_gates("NewGate=true,DRADeviceTaints=true,DRAExtendedResource=true", [old, new])

    assert choice.flag_value == "DRADeviceTaints=true,DRAExtendedResource=true"
    assert list(choice.dropped) == ["NewGate"]
    assert str(old / "kube-apiserver") in choice.dropped["NewGate"]
    assert "unrecognized feature gate: NewGate" in choice.dropped["NewGate"]


def test_a_locked_gate_can_be_set_to_its_locked_value_only(tmp_path: Path) -> None:
    release = fake_release(tmp_path, "v1.37.2", known="DRADeviceTaints", locked="DRADeviceTaints")
    assert refusal(release / "kube-apiserver", "DRADeviceTaints=true") is None
    assert "locked to true" in (refusal(release / "kube-apiserver", "DRADeviceTaints=false") or "")


def test_a_refusal_that_names_no_gate_is_an_error(tmp_path: Path) -> None:
    bin_dir = tmp_path / "broken" / "bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "kube-apiserver").write_text("#!/bin/sh\necho 'segmentation fault' >&2\nexit 2\n")
    os.chmod(bin_dir / "kube-apiserver", 0o755)
    with pytest.raises(ClusterError, match="refuses --feature-gates=A=true: segmentation fault"):
        choose_gates("A=true", [bin_dir])


def test_a_malformed_gate_is_an_error_naming_feature_gates() -> None:
    with pytest.raises(ClusterError, match="FEATURE_GATES"):
        choose_gates("DRAPartitionableDevices", [])
