"""The command line's edges, one rule per class: closed or deserted standard streams, sizes with
an upper bound, empty paths, and error lines that name the input and what to do.

Streams are a matter of the process, so each of those tests runs the real ``e2e-dra`` in a
subprocess with the descriptor closed (``>&-``) or a pipe whose reader has gone (``| head -c0``).
Nothing here reaches a cluster: every ``driver`` run stops at a flag, or at a kubeconfig that does
not exist (this host may run a cluster whose admin kubeconfig is the driver's default).
"""

from __future__ import annotations

import errno
import os
import subprocess
import sys
from pathlib import Path

import pytest

from e2e_dra.errors import EXIT_STDOUT_GONE
from e2e_dra.hostkit import atomic_write_text

LAUNCHER = (  # closes or deserts a stream of its own, then execs the command line
    "import os, sys; how = sys.argv[1]\n"
    "if how == 'close-stdout': os.close(1)\n"
    "if how == 'close-stderr': os.close(2)\n"
    "if how == 'close-stdin': os.close(0)\n"
    "if how == 'close-all': [os.close(fd) for fd in (0, 1, 2)]\n"
    "os.execv(sys.executable, [sys.executable, '-m', 'e2e_dra.cli', *sys.argv[2:]])\n"
)


def run(
    how: str, *args: str, deserted: str = "", env: dict[str, str] | None = None
) -> tuple[int, str, str]:
    """``e2e-dra ARGS`` with its streams as ``how`` says; ``deserted`` ("stdout", "stderr"): that
    stream is a pipe whose reader closed before the command started. (exit status, stdout,
    stderr); a deserted stream reads as ""."""
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    if deserted == "stdout":
        os.close(out_r)
    if deserted == "stderr":
        os.close(err_r)
    base = {k: v for k, v in os.environ.items() if not k.startswith(("KUBE", "E2E_DRA"))}
    proc = subprocess.Popen(
        [sys.executable, "-c", LAUNCHER, how, *args],
        stdin=subprocess.DEVNULL,
        stdout=out_w,
        stderr=err_w,
        env={**base, "CI": "true", **(env or {})},
    )
    os.close(out_w)
    os.close(err_w)
    out = _read_all(out_r) if deserted != "stdout" else b""
    err = _read_all(err_r) if deserted != "stderr" else b""
    return proc.wait(timeout=60), out.decode(), err.decode()


def _read_all(fd: int) -> bytes:
    chunks = []
    while chunk := os.read(fd, 1 << 16):
        chunks.append(chunk)
    os.close(fd)
    return b"".join(chunks)


def quiet(stderr: str) -> None:
    assert "Traceback" not in stderr, stderr
    assert "Exception ignored" not in stderr, stderr
    assert "internal error" not in stderr, stderr


# --- closed and deserted streams -------------------------------------------------------------


@pytest.mark.parametrize(
    "args",
    [["previous-minor", "v1.37.0"], ["--help"], ["--version"], ["download", "--help"]],
    ids=["answer", "help", "version", "command-help"],
)
@pytest.mark.parametrize("how", ["closed", "deserted"])
def test_stdout_nobody_reads_ends_quietly_with_141(args: list[str], how: str) -> None:
    if how == "closed":
        status, _, err = run("close-stdout", *args)
    else:
        status, _, err = run("keep", *args, deserted="stdout")
    assert status == EXIT_STDOUT_GONE == 141
    assert err == ""  # quietly: the reader left on purpose (`| head`), as after SIGPIPE
    quiet(err)


def test_stdout_nobody_reads_does_not_hide_an_error() -> None:
    status, _, err = run("close-stdout", "previous-minor", "v1.x")
    assert status == 3
    assert err.splitlines()[-1].startswith("e2e-dra: error: not a Kubernetes version: 'v1.x'")
    quiet(err)


def test_stdout_on_a_full_disk_is_still_a_line_with_a_next_step() -> None:
    with open("/dev/full", "w") as full:
        proc = subprocess.run(
            [sys.executable, "-m", "e2e_dra.cli", "previous-minor", "v1.37.0"],
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
            timeout=60,
            check=False,
        )
    assert proc.returncode == 6
    (line,) = proc.stderr.splitlines()
    assert "cannot write the result to stdout: No space left on device" in line
    assert "redirect it" in line
    quiet(proc.stderr)


@pytest.mark.parametrize("how", ["closed", "deserted"])
@pytest.mark.parametrize(
    ("args", "status", "out"),
    [
        (["previous-minor", "v1.37.0"], 0, "1.36\n"),
        (["previous-minor", "v1.x"], 3, ""),
        (["frobnicate"], 2, ""),
    ],
    ids=["success", "bad-input", "usage"],
)
def test_stderr_nobody_reads_changes_nothing_but_its_lines(
    how: str, args: list[str], status: int, out: str
) -> None:
    if how == "closed":
        got, stdout, _ = run("close-stderr", *args)
    else:
        got, stdout, _ = run("keep", *args, deserted="stderr")
    assert (got, stdout) == (status, out)  # the error line is lost, never written to stdout


def test_a_closed_stderr_is_not_taken_by_a_file_the_command_opens(tmp_path: Path) -> None:
    """With fd 2 closed, the next file opened would get number 2 and every progress line after."""
    cache = tmp_path / "cache"
    status, _, _ = run(
        "close-stderr",
        "download",
        "v1.36.5",
        "--base-url",
        "http://127.0.0.1:9/release",
        "--cache-dir",
        str(cache),
        env={"E2E_DRA_DOWNLOAD_DEADLINE": "3"},
    )
    assert status == 5  # nothing listens there: the mirror failed, said nowhere
    for path in cache.rglob("*"):
        if path.is_file():
            assert b"e2e-dra" not in path.read_bytes(), path


@pytest.mark.parametrize("how", ["close-stdin", "close-all"])
def test_closed_stdin_or_every_stream_is_no_crash(how: str) -> None:
    status, _, err = run(how, "previous-minor", "v1.37.0")
    assert status == (0 if how == "close-stdin" else EXIT_STDOUT_GONE)
    quiet(err)


def test_streams_are_given_back_after_an_in_process_run(capsys: pytest.CaptureFixture[str]) -> None:
    from e2e_dra.cli import main

    stdout, stderr = sys.stdout, sys.stderr
    assert main(["previous-minor", "v1.37.0"]) == 0
    assert (sys.stdout, sys.stderr) == (stdout, stderr)
    assert capsys.readouterr().out == "1.36\n"


# --- sizes, names and paths of the flags -----------------------------------------------------

NO_KUBECONFIG = "/nonexistent/e2e-dra-test/admin.kubeconfig"  # never a running cluster's
CLI = (sys.executable, "-m", "e2e_dra.cli")
DRIVER = ("driver", "kubelet-plugin", "--node-name", "n1", "--kubeconfig", NO_KUBECONFIG)


def driver(*flags: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            *CLI,
            "driver",
            "kubelet-plugin",
            "--node-name",
            "n1",
            "--kubeconfig",
            NO_KUBECONFIG,
            *flags,
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**os.environ, "CI": "true"},
    )


def one_line(proc: subprocess.CompletedProcess[str], status: int, *named: str) -> str:
    quiet(proc.stderr)
    assert proc.returncode == status, proc.stderr
    (line,) = proc.stderr.splitlines()
    assert line.startswith("e2e-dra: error: "), line
    for text in named:
        assert text in line, line
    return line


@pytest.mark.parametrize(
    ("flags", "named"),
    [
        (["--num-devices", "1000000000"], ("--num-devices", "'1000000000'", "0 to 128")),
        (["--num-devices", "-1"], ("--num-devices", "'-1'", "0 to 128")),
        (["--num-devices=-1"], ("--num-devices", "'-1'", "0 to 128")),
        (["--num-devices", "4x"], ("--num-devices", "'4x'", "whole number")),
        (["--kube-api-qps", "nan"], ("--kube-api-qps", "'nan'", "0 to 10000")),
        (["--kube-api-qps", "-0.5"], ("--kube-api-qps", "'-0.5'", "0 to 10000")),
        (["--kube-api-qps", "1e300"], ("--kube-api-qps", "'1e300'", "0 to 10000")),
        (["--kube-api-burst", "99999999999"], ("--kube-api-burst", "'99999999999'", "0 to 10000")),
        (["--kube-api-burst", "-1"], ("--kube-api-burst", "'-1'", "0 to 10000")),
    ],
    ids=[
        "billion-devices",
        "negative-devices",
        "negative-devices-joined",
        "not-a-number",
        "nan-qps",
        "negative-qps",
        "huge-qps",
        "burst",
        "negative-burst",
    ],
)
def test_a_number_past_its_bound_is_a_usage_mistake_in_one_line(
    flags: list[str], named: tuple[str]
) -> None:
    """As argparse refuses ``--count x`` for ``type=int``: exit status 2, one usage line that
    names the option and the value, and what to give."""
    proc = driver(*flags)
    quiet(proc.stderr)
    assert proc.returncode == 2, proc.stderr
    (line,) = proc.stderr.splitlines()
    assert line.startswith("e2e-dra driver kubelet-plugin: error: "), line
    assert line.endswith("(see e2e-dra driver kubelet-plugin --help)"), line
    assert all(text in line for text in named), line
    assert "give " in line


@pytest.mark.parametrize("count", ["0", "128"])
def test_no_devices_and_the_most_are_counts_the_plugin_serves(count: str) -> None:
    """0 is an empty pool (a ResourceSlice without devices, which the API server accepts): the
    flag lets it through, and the command goes on to the kubeconfig, which does not exist."""
    one_line(driver("--num-devices", count), 3, "--kubeconfig", "does not exist")


@pytest.mark.parametrize(
    ("flags", "named"),
    [
        (["--drivername", "../../etc"], "--drivername '../../etc'"),
        (["--drivername", ""], "--drivername ''"),
        (["--namespace", "a.b"], "--namespace 'a.b'"),
    ],
)
def test_a_name_kubernetes_would_refuse_is_refused_at_once(flags: list[str], named: str) -> None:
    one_line(driver(*flags), 3, named, "give a DNS")


@pytest.mark.parametrize(
    "args",
    [
        [*DRIVER, "--cdi-dir", ""],
        [*DRIVER, "--datadir", ""],
        [*DRIVER, "--plugin-registration-path", ""],
        [*DRIVER, "--kubeconfig", ""],
        ["cluster", "up", "--source-dir", ""],
        ["cluster", "up", "--bin-dir", ""],
        ["cluster", "up", "--log-dir", ""],
        ["provision", "--check", "--source-dir", ""],
        ["versions", "--source-dir", ""],
        ["versions", "--bin-dir", ""],
        ["download", "v1.36.5", "--cache-dir", ""],
        ["build", "v1.36.5", "--cache-dir", ""],
    ],
    ids=lambda args: (
        "-".join(a for a in args if a.startswith("--") and a != "--node-name") + f"@{args[0]}"
    ),
)
def test_an_empty_path_is_refused_not_read_as_the_current_directory(
    args: list[str], tmp_path: Path
) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "e2e_dra.cli", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=tmp_path,
        env={**os.environ, "CI": "true"},
    )
    flag = args[-2]
    one_line(proc, 3, f"{flag} '' is empty", "give a")
    assert list(tmp_path.iterdir()) == []  # nothing written where it was started


def test_a_missing_kubeconfig_names_its_source_and_the_next_step(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "e2e_dra.cli", "driver", "kubelet-plugin", "--node-name", "n1"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**os.environ, "CI": "true", "KUBECONFIG": str(tmp_path / "nope")},
    )
    one_line(proc, 3, f"KUBECONFIG '{tmp_path / 'nope'}' does not exist", "give the admin")


def test_a_bad_feature_gate_is_bad_input_with_an_example() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "e2e_dra.cli", "cluster", "up", "--feature-gates", "X"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    one_line(proc, 3, "--feature-gates 'X'", "e.g. DRADeviceTaints=true")


# --- an atomic write names what was asked for, not its temporary file ---------------------------


def test_an_atomic_write_that_fails_names_the_file_asked_for(tmp_path: Path) -> None:
    target = tmp_path / "no-such-dir" / "report.html"
    with pytest.raises(FileNotFoundError) as failed:
        atomic_write_text(target, "page")
    assert failed.value.filename == str(target)
    assert failed.value.errno == errno.ENOENT
