"""The component net: panics in a component's log and processes replaced behind the suite's
back fail the entry that just ended, naming the component and quoting its log."""

from __future__ import annotations

from pathlib import Path

from e2e_dra._suite._liveness import MAX_LINE, ComponentNet, Running

PANIC = (
    'E1204 19:30:01.000000   123 runtime.go:142] "Observed a panic" panic="interface conversion: '
    'interface {} is *v1beta2.DeviceTaintRule, not *v1alpha3.DeviceTaintRule"\n'
    "goroutine 412 [running]:\n"
    "k8s.io/apimachinery/pkg/util/runtime.logPanic(...)\n"
)


def _log(tmp_path: Path, name: str, text: str) -> Path:
    log = tmp_path / name
    log.write_text(text)
    return log


def test_a_panic_in_a_log_is_a_finding_naming_the_component_with_its_stack(
    tmp_path: Path,
) -> None:
    log = _log(tmp_path, "kube-scheduler-2-restored-1.36.log", "I1204 started\n" + PANIC)
    net = ComponentNet()

    (found,) = net.look({"kube-scheduler": Running(123, log)}, restarts_allowed=True)

    assert found.startswith("kube-scheduler panicked: E1204")
    assert "*v1beta2.DeviceTaintRule, not *v1alpha3.DeviceTaintRule" in found
    assert "goroutine 412 [running]:" in found
    assert found.endswith(f"; log: {log}")


def test_each_panic_is_said_once_and_only_what_was_written_since_is_read(tmp_path: Path) -> None:
    log = _log(tmp_path, "kube-apiserver-0.log", PANIC)
    net = ComponentNet()
    running = {"kube-apiserver": Running(1, log)}
    assert len(net.look(running, restarts_allowed=True)) == 1

    assert net.look(running, restarts_allowed=False) == []
    with log.open("a") as more:
        more.write('E1204 wrap.go:57] "apiserver panic\'d" method="GET" URI="/api"\n')
        more.write("panic: runtime error: makeslice: cap out of range\n")
    found = net.look(running, restarts_allowed=False)
    assert [f.split(": ", 1)[0] for f in found] == ["kube-apiserver panicked"] * 2
    assert "makeslice: cap out of range" in found[1]


def test_a_quiet_log_and_ordinary_errors_are_no_finding(tmp_path: Path) -> None:
    text = 'E1204 reflector.go:200] "Failed to watch" err="connection refused"\nI1204 ok\n'
    log = _log(tmp_path, "kubelet-0.log", text)
    assert ComponentNet().look({"kubelet": Running(5, log)}, restarts_allowed=True) == []


def test_a_process_replaced_during_a_phase_is_a_finding_and_during_a_step_is_not(
    tmp_path: Path,
) -> None:
    log = _log(tmp_path, "kubelet-0.log", "")
    net = ComponentNet()
    net.look({"kubelet": Running(10, log)}, restarts_allowed=True)

    assert net.look({"kubelet": Running(11, log)}, restarts_allowed=True) == []  # an upgrade
    (found,) = net.look({"kubelet": Running(12, log)}, restarts_allowed=False)
    assert found == f"kubelet was restarted behind the suite's back (pid 11 -> 12); log: {log}"


def test_the_last_words_of_a_restarted_component_are_read_from_its_earlier_log(
    tmp_path: Path,
) -> None:
    first = _log(tmp_path, "kube-scheduler-0-initial.log", "")
    net = ComponentNet()
    net.look({"kube-scheduler": Running(1, first)}, restarts_allowed=True)
    with first.open("a") as log:  # written after the last look, before the upgrade stopped it
        log.write(PANIC)
    second = _log(tmp_path, "kube-scheduler-1-v1.37.2.log", "")

    (found,) = net.look({"kube-scheduler": Running(2, second)}, restarts_allowed=True)

    assert found.startswith("kube-scheduler panicked:")
    assert found.endswith(f"; log: {first}")


def test_a_huge_line_is_read_in_pieces_and_a_panic_after_it_still_found(tmp_path: Path) -> None:
    log = _log(tmp_path, "kube-controller-manager-0.log", "x" * (5 * MAX_LINE) + "\n" + PANIC)
    (found,) = ComponentNet().look(
        {"kube-controller-manager": Running(3, log)}, restarts_allowed=True
    )
    assert "Observed a panic" in found
    assert len(found) < 2000


def test_a_log_that_disappeared_is_no_error(tmp_path: Path) -> None:
    log = _log(tmp_path, "kube-proxy-0.log", "")
    net = ComponentNet()
    net.look({"kube-proxy": Running(4, log)}, restarts_allowed=True)
    log.unlink()
    assert net.look({}, restarts_allowed=True) == []


def test_a_process_the_suite_started_again_itself_is_no_finding(tmp_path: Path) -> None:
    log = _log(tmp_path, "kube-scheduler-0.log", "")
    net = ComponentNet()
    net.look({"kube-scheduler": Running(10, log)}, restarts_allowed=True)
    again = _log(tmp_path, "kube-scheduler-0-restarted.log", "")

    net.restarted({"kube-scheduler": Running(11, again)})  # after a known bug crashed it

    assert net.look({"kube-scheduler": Running(11, again)}, restarts_allowed=False) == []
