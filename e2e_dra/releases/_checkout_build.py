"""A checkout as the version under test, built here: only the commands its change touches.

A developer asks "does my change break DRA across an upgrade?", and the answer should not wait for
six commands to compile when the change is one line of the kubelet. So a git checkout (a real one,
or one ``e2e-dra source`` wrote) that holds no build of its own is built command by command:

- its *base* is the release tag ``git describe`` finds below HEAD, and its *change* every file
  that differs from that tag (commits on top of it, edits, new files);
- a command is built from the checkout when the change touches a package it links (``go list`` of
  its dependencies in the checkout as it is now), or touches go.mod or go.sum; every other command
  is the base release's own build, from the cache (downloaded, or built once from the module
  proxy), and the run says so among its deviations;
- a command built is stamped as upstream's build stamps it (``hack/print-workspace-status.sh``:
  ``v1.38.0-beta.0-dirty``), with ``-trimpath`` so that every checkout of one release shares the
  Go build cache (a package's directory is no part of its cache key then), and lands where
  ``make`` puts it, ``_output/local/bin/<os>/<arch>``.

A checkout that already holds a build e2e-dra did not make (``make``'s) is used as it is.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from e2e_dra._gotool import GoToolchain, go_build, go_env, toolchain_for
from e2e_dra._platform import host_platform
from e2e_dra.errors import E2EDRAError, ReleaseError
from e2e_dra.releases._gobuild import BUILT_COMMANDS
from e2e_dra.releases._gomodule import KUBERNETES_MODULE, go_directive
from e2e_dra.releases._release import Release
from e2e_dra.releases._stamp import stamp_ldflags
from e2e_dra.supervise import ProcessError, ask
from e2e_dra.versions import parse_version, workspace_status

logger = logging.getLogger(__name__)

TREE_ENV = {"GOWORK": "off"}
"""A checkout is built as one module: its go.mod replaces each staging module with its directory
(the workspace file says the same, but forbids ``-mod=mod``)."""
OURS = PurePosixPath(".e2e-dra")
"""What ``e2e-dra source`` added to a tree; Go's ``./...`` patterns skip a directory named so."""
STANDINS = OURS / "standins"
MANIFEST = "e2e-dra-build.json"
"""Beside the binaries: what e2e-dra built there, and from what (its absence: ``make`` built
them)."""
_STAMPS = ("gitVersion", "gitMajor", "gitMinor", "gitCommit", "gitTreeState", "buildDate")
"""What ``make`` stamps into the version packages, as the workspace status names them."""
_MODULE_FILES = frozenset({"go.mod", "go.sum", "go.work", "go.work.sum"})
_PACKAGE_ROOTS = ("staging/src/", f"{STANDINS}/", "vendor/")
_LIST_MARK = "e2e-dra-deps"
_ANSWER_LIMIT = 64 * 1024 * 1024  # go list of six commands' dependencies: about 1 MB
_GO_LIST_TIMEOUT = 900.0  # a cold module cache downloads the modules first


def build_dir(tree: Path) -> Path:
    """Where ``make`` (and so e2e-dra) puts a checkout's binaries."""
    return tree / "_output" / "local" / "bin" / "linux" / host_platform()[1]


def builds_itself(tree: Path) -> bool:
    """Whether e2e-dra builds ``tree`` (a git checkout holding no build of ``make``'s)."""
    built = build_dir(tree)
    theirs = (built / "kube-apiserver").exists() and not (built / MANIFEST).is_file()
    return (tree / ".git").exists() and not theirs


@dataclass(frozen=True)
class CheckoutBuild:
    """What :func:`build_checkout` did."""

    bin_dir: Path
    version: str
    base: str | None  # the release the change is on, when git names one
    changed_files: int | None  # None: unknown, everything was built
    built: dict[str, float]  # command -> seconds
    reused: tuple[str, ...]  # the base release's own binaries
    base_deviations: tuple[str, ...] = ()  # how the reused binaries differ from the release

    @property
    def deviations(self) -> tuple[str, ...]:
        if not self.reused:
            return ()
        return (
            *self.base_deviations,
            f"{', '.join(self.reused)}: {self.base}'s build, as the change touches none of "
            "their packages",
        )


def build_checkout(tree: Path, base_release: Callable[[str], Release]) -> CheckoutBuild:
    """Build what ``tree``'s change touches into :func:`build_dir`; take the rest from
    ``base_release(tag)``."""
    started = time.monotonic()
    bin_dir = build_dir(tree)
    bin_dir.mkdir(parents=True, exist_ok=True)
    log = tree / "_output" / "e2e-dra-build.log"
    log.write_text("")
    status = _stamps(tree)
    version = status["gitVersion"]
    toolchain = _toolchain(tree)
    base = _base_tag(tree)
    changed = _changed_files(tree, base) if base else None
    touched = _touched(tree, toolchain, changed) if changed is not None else set(BUILT_COMMANDS)
    base_build = None
    if len(touched) < len(BUILT_COMMANDS):
        assert base is not None
        try:
            base_build = base_release(base)
        except E2EDRAError as exc:
            logger.info(f"{tree}: the base release {base} cannot be had ({exc}): building all")
            touched = set(BUILT_COMMANDS)
    built: dict[str, float] = {}
    commands = [c for c in BUILT_COMMANDS if c in touched]
    for index, command in enumerate(commands, 1):
        begun = time.monotonic()
        target = bin_dir / command
        if target.is_symlink():  # the base release's binary: never written through
            target.unlink()
        what = f"building {command} {version} from {tree} ({index}/{len(commands)})"
        _build_stamped(tree, f"cmd/{command}", target, status, toolchain, what, log)
        built[command] = round(time.monotonic() - begun, 1)
    reused = tuple(c for c in BUILT_COMMANDS if c not in touched)
    for command in reused:
        assert base_build is not None
        target = bin_dir / command
        if target.exists() or target.is_symlink():
            target.unlink()
        target.symlink_to(base_build.bin_dir / command)
    result = CheckoutBuild(
        bin_dir=bin_dir,
        version=version,
        base=base,
        changed_files=len(changed) if changed is not None else None,
        built=built,
        reused=reused,
        base_deviations=base_build.deviations if base_build else (),
    )
    (bin_dir / MANIFEST).write_text(
        json.dumps(
            {
                "version": version,
                "base": base,
                "changed_files": result.changed_files,
                "built_seconds": built,
                "from_base": list(reused),
                "seconds": round(time.monotonic() - started, 1),
            },
            indent=1,
        )
        + "\n"
    )
    said = ", ".join(f"{c} {s:.0f}s" for c, s in built.items()) or "nothing"
    logger.info(
        f"{tree} ({version}): built {said}; from {base}: {', '.join(reused) or 'nothing'} "
        f"({time.monotonic() - started:.0f}s, log: {log})"
    )
    return result


def build_package(tree: Path, package: str, name: str) -> tuple[Path, str]:
    """``package`` of the checkout (``test/e2e/dra/test-driver``) built as its commands are (its
    Go, its version stamps, ``-trimpath``) into :func:`build_dir` as ``name``: what a developer
    gets from ``make WHAT=<package>``. Returns the binary and the checkout's version."""
    status = _stamps(tree)
    target = build_dir(tree) / name
    target.parent.mkdir(parents=True, exist_ok=True)
    what = f"building {name} {status['gitVersion']} from {tree}"
    log = tree / "_output" / f"e2e-dra-build-{name}.log"
    _build_stamped(tree, package, target, status, _toolchain(tree), what, log)
    return target, status["gitVersion"]


def _build_stamped(
    tree: Path,
    package: str,
    target: Path,
    status: dict[str, str],
    toolchain: GoToolchain,
    what: str,
    log: Path,
) -> None:
    """One package of the checkout, stamped with ``status`` as ``make`` stamps it, built with
    ``-trimpath`` (every checkout of a release shares the Go build cache)."""
    go_build(
        [f"./{package}"],
        output=target,
        flags=["-trimpath", "-ldflags", stamp_ldflags({k: status.get(k, "") for k in _STAMPS})],
        cwd=tree,
        what=what,
        log=log,
        env=go_env(**TREE_ENV),
        toolchain=toolchain,
    )


def checkout_version(tree: Path) -> str:
    """The version the checkout's build is stamped with (``v1.38.0-beta.0-dirty``)."""
    return _stamps(tree)["gitVersion"]


def changed_packages(paths: Iterable[str]) -> set[str] | None:
    """The import paths of the packages ``paths`` (relative to the tree) belong to; None when one
    is a go.mod or go.sum (then any package may build differently). Tests change no command."""
    packages: set[str] = set()
    for path in paths:
        file = PurePosixPath(path)
        if file.name in _MODULE_FILES:
            return None
        if file.name.endswith("_test.go"):
            continue
        directory = str(file.parent)
        for root in _PACKAGE_ROOTS:
            if directory.startswith(root):
                packages.add(directory.removeprefix(root))
                break
        else:
            packages.add(
                KUBERNETES_MODULE if directory == "." else f"{KUBERNETES_MODULE}/{directory}"
            )
    return packages


def git(tree: Path, *args: str, env: dict[str, str] | None = None, limit: int = 1 << 20) -> str:
    """``git args`` in ``tree``; its output, or one error line naming the command."""
    what = f"git {' '.join(args[:2])} in {tree}"
    try:
        answer = ask(
            what,
            ["git", *args],
            cwd=tree,
            env={**os.environ, **(env or {})},
            timeout=300.0,
            limit=limit,
        )
    except ProcessError as exc:
        raise ReleaseError(str(exc)) from None
    if answer.returncode != 0:
        last = (answer.stderr.strip().splitlines() or ["no output"])[-1][:300]
        raise ReleaseError(f"{what} failed (exit {answer.returncode}): {last}")
    if answer.truncated:
        raise ReleaseError(f"{what} printed more than {limit} bytes")
    return answer.stdout


def _stamps(tree: Path) -> dict[str, str]:
    """The checkout's version stamps, dated by its HEAD commit: the same tree stamps the same
    binary, so an unchanged command is not linked again."""
    epoch = git(tree, "log", "-1", "--format=%ct", "HEAD").strip()
    status = workspace_status(tree, extra={"SOURCE_DATE_EPOCH": epoch})
    if not status.get("gitVersion"):
        raise ReleaseError(f"{tree}/hack/print-workspace-status.sh printed no gitVersion")
    return status


def _toolchain(tree: Path) -> GoToolchain:
    go_mod = (tree / "go.mod").read_text(errors="replace")
    go_version = tree / ".go-version"
    preferred = go_version.read_text().strip() if go_version.is_file() else None
    return toolchain_for(go_directive(go_mod), preferred or None)


def _base_tag(tree: Path) -> str | None:
    """The release tag below HEAD, if git names one."""
    try:
        tag = git(tree, "describe", "--tags", "--match", "v*", "--abbrev=0", "HEAD").strip()
    except ReleaseError as exc:
        logger.info(f"{tree}: no release tag below HEAD ({exc}): building every command")
        return None
    try:
        is_release = parse_version(tag).is_release
    except E2EDRAError:
        is_release = False
    return tag if is_release else None


def _changed_files(tree: Path, base: str) -> list[str] | None:
    """Every file that differs from ``base``, new ones included; None when too many to say."""
    try:
        tracked = git(tree, "diff", "--name-only", "--no-renames", "-z", base, limit=_ANSWER_LIMIT)
        untracked = git(
            tree, "ls-files", "-z", "--others", "--exclude-standard", limit=_ANSWER_LIMIT
        )
    except ReleaseError as exc:
        logger.info(
            f"{tree}: cannot tell what changed since {base} ({exc}): building every command"
        )
        return None
    return [p for p in (tracked + untracked).split("\0") if p]


def _touched(tree: Path, toolchain: GoToolchain, changed: list[str]) -> set[str]:
    """The commands that link a package of ``changed``."""
    packages = changed_packages(changed)
    if packages is None:
        return set(BUILT_COMMANDS)
    if not packages:
        return set()
    return {c for c, deps in _dependencies(tree, toolchain).items() if deps & packages}


def _dependencies(tree: Path, toolchain: GoToolchain) -> dict[str, set[str]]:
    """Each command's package and every package it links, as the checkout is now."""
    what = f"go list of the commands' dependencies in {tree}"
    form = f"{_LIST_MARK} {{{{.ImportPath}}}}{{{{range .Deps}}}} {{{{.}}}}{{{{end}}}}"
    cmd = [toolchain.go, "list", "-e", "-f", form, *(f"./cmd/{c}" for c in BUILT_COMMANDS)]
    try:
        answer = ask(
            what,
            cmd,
            cwd=tree,
            env=go_env(**TREE_ENV),
            timeout=_GO_LIST_TIMEOUT,
            limit=_ANSWER_LIMIT,
        )
    except ProcessError as exc:
        raise ReleaseError(str(exc)) from None
    if answer.returncode != 0 or answer.truncated:
        last = (answer.stderr.strip().splitlines() or ["no output"])[-1][:300]
        raise ReleaseError(f"{what} failed (exit {answer.returncode}): {last}")
    found: dict[str, set[str]] = {}
    for line in answer.stdout.splitlines():
        words = line.split()
        if len(words) >= 2 and words[0] == _LIST_MARK:
            command = words[1].rsplit("/", 1)[-1]
            found[command] = set(words[1:])
    missing = [c for c in BUILT_COMMANDS if c not in found]
    if missing:
        raise ReleaseError(f"{what} listed no {', '.join(missing)}: {tree} has no cmd/ for them")
    return found
