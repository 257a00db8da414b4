"""Pure parts of the engine: script output, feature-gate merging, locked gates, names."""

from __future__ import annotations

from pathlib import Path

import pytest
from fake_k8s.gate_validator import fake_release

from e2e_dra.localupcluster import (
    ClusterError,
    ModifyOptions,
    binary_index,
    filter_locked_gates,
    log_dir_for_test,
    merge_feature_gates,
    parse_run_line,
    parse_setting,
)


def test_run_line_splits_on_single_spaces_and_keeps_empty_words() -> None:
    run = parse_run_line("RUN kube-apiserver: sudo -E /bin/kube-apiserver --a=1  --b=$x 'q'")
    assert run is not None
    assert run.name == "kube-apiserver"
    assert run.argv == ["sudo", "-E", "/bin/kube-apiserver", "--a=1", "", "--b=$x", "'q'"]


def test_run_line_splits_name_only_once() -> None:
    run = parse_run_line("RUN kubectl: kubectl get --raw=/a: b")
    assert run is not None and run.name == "kubectl"
    assert run.argv == ["kubectl", "get", "--raw=/a:", "b"]


@pytest.mark.parametrize("line", ["hello", "+ X=1", "RUNNING kubelet: x", ""])
def test_other_lines_are_not_run_lines(line: str) -> None:
    assert parse_run_line(line) is None


@pytest.mark.parametrize("line", ["RUN kubelet", "RUN : /bin/x", "RUN kubelet: "])
def test_malformed_run_line_is_an_error_naming_the_line(line: str) -> None:
    with pytest.raises(ClusterError, match="unexpected RUN line"):
        parse_run_line(line)


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("+ API_SECURE_PORT=6443", ("API_SECURE_PORT", "6443")),
        ("+ CERT_DIR=/var/run/kubernetes", ("CERT_DIR", "/var/run/kubernetes")),
        ("+ EMPTY=", ("EMPTY", "")),
        ("+ QUOTED='a b'", ("QUOTED", "'a b'")),
        ("++ NESTED=1", None),
        ("+ lower=1", None),
        ("API_SECURE_PORT=6443", None),
        ("+ echo hi", None),
    ],
)
def test_settings_are_bash_xtrace_assignments(line: str, expected: tuple | None) -> None:
    assert parse_setting(line) == expected


# Upstream's table (localupcluster_test.go), then more.
@pytest.mark.parametrize(
    ("argv", "gates", "expected"),
    [
        (["--feature-gates="], "", ["--feature-gates="]),
        (["a", "b"], "fg1=true", ["a", "b", "--feature-gates=fg1=true"]),
        (
            ["a", "--feature-gates=fg1=false", "b"],
            "fg1=true",
            ["a", "--feature-gates=fg1=true", "b"],
        ),
        (
            ["--feature-gates=fg1=false,fg2=true"],
            "fg3=true",
            ["--feature-gates=fg1=false,fg2=true,fg3=true"],
        ),
        (
            ["--feature-gates=fg1=false,fg2=true"],
            "fg2=false",
            ["--feature-gates=fg1=false,fg2=false"],
        ),
        (
            [
                "x",
                "--feature-gates=fg1=false",
                "y",
                "--feature-gates=fg2=true",
                "--feature-gates=fg3=false",
            ],
            "fg4=true",
            ["x", "--feature-gates=fg1=false,fg2=true,fg3=false,fg4=true", "y"],
        ),
        (
            ["--feature-gates=fg1=false", "--feature-gates=fg1=true"],
            "",
            ["--feature-gates=fg1=true"],
        ),
        (["a", "--feature-gates=fg1=true"], "", ["a", "--feature-gates=fg1=true"]),
        ([], "fg1=true", ["--feature-gates=fg1=true"]),
        (
            [],
            "zeta=true,alpha=false,mike=true",
            ["--feature-gates=alpha=false,mike=true,zeta=true"],
        ),
        # more: empty words survive, gate values are normalized, spaces around items are ignored
        (["", "a", ""], "G=True", ["", "a", "", "--feature-gates=G=true"]),
        (
            ["--feature-gates=AllAlpha=false"],
            " B=1 , A=f ",
            ["--feature-gates=A=false,AllAlpha=false,B=true"],
        ),
        (["a"], "", ["a"]),
    ],
)
def test_merge_feature_gates(argv: list[str], gates: str, expected: list[str]) -> None:
    original = list(argv)
    assert merge_feature_gates(argv, gates) == expected
    assert argv == original


@pytest.mark.parametrize(
    ("argv", "gates"),
    [(["--feature-gates=not-a-pair"], ""), ([], "not-a-pair"), ([], "a=maybe"), ([], "=true")],
)
def test_merge_feature_gates_rejects_bad_gates_naming_them(argv: list[str], gates: str) -> None:
    with pytest.raises(ClusterError, match="invalid feature gate"):
        merge_feature_gates(argv, gates)


def test_filter_locked_gates_drops_what_the_release_refuses(tmp_path: Path) -> None:
    gates = (
        "DRAExtendedResource=false,DRADeviceTaints=true,MyGate=true,DynamicResourceAllocation=true"
    )
    known = "DRAExtendedResource DRADeviceTaints MyGate DynamicResourceAllocation"
    new = fake_release(tmp_path, "v1.37.2", known, locked="DRAExtendedResource DRADeviceTaints")
    # locked to their default: only the value that differs is refused
    assert filter_locked_gates(gates, new) == (
        "DRADeviceTaints=true,DynamicResourceAllocation=true,MyGate=true"
    )
    old = fake_release(tmp_path, "v1.35.0", "DRAExtendedResource DynamicResourceAllocation")
    assert filter_locked_gates(gates, old) == (
        "DRAExtendedResource=false,DynamicResourceAllocation=true"
    )


def test_binary_index_skips_sudo_wrapper() -> None:
    assert binary_index(["sudo", "-E", "/out/kubelet", "--v=3"], "kubelet") == 2
    assert binary_index(["/out/kube-proxy", "--x=/kube-proxy"], "kube-proxy") == 0
    with pytest.raises(ClusterError, match="binary filename of kubelet not found"):
        binary_index(["sudo", "/out/kube-proxy"], "kubelet")


def test_modify_options_component_file_prefers_explicit_file() -> None:
    options = ModifyOptions(bin_dir=Path("/new"), file_by_component={"kubelet": Path("/k/kubelet")})
    assert options.component_file("kubelet") == Path("/k/kubelet")
    assert options.component_file("kube-proxy") == Path("/new/kube-proxy")
    assert ModifyOptions().component_file("kubelet") is None


def test_log_dir_for_a_test_name_is_sanitized(tmp_path: Path) -> None:
    assert log_dir_for_test(tmp_path, "TestUpgradeDowngrade [sig-node] (x): a/b\\c") == tmp_path / (
        "TestUpgradeDowngrade-x-a-b-c"
    )
