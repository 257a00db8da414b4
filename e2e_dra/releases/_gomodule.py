"""The small Go module through which Kubernetes is built from the module proxy.

The ``k8s.io/kubernetes`` module cannot be built as a dependency as it stands: its go.mod replaces
every staging module (``k8s.io/api``, ``k8s.io/client-go``, ...) with a directory that is not in the
module zip, and a dependency's replace directives are ignored anyway. The build module therefore
requires ``k8s.io/kubernetes`` and restates those replaces against the published staging modules,
whose tags follow the release (``v1.37.2`` -> ``v0.37.2``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from e2e_dra.errors import ReleaseError

KUBERNETES_MODULE = "k8s.io/kubernetes"
BUILD_MODULE = "e2edra.build/kubernetes"

_LOCAL_TARGET = re.compile(r"^\.{1,2}/")


@dataclass(frozen=True)
class Replace:
    old: str  # "k8s.io/api" (or "module version")
    new: str  # "./staging/src/k8s.io/api" or "module version"

    @property
    def is_local(self) -> bool:
        return bool(_LOCAL_TARGET.match(self.new))


def staging_version(version: str) -> str:
    """``v1.37.2`` -> ``v0.37.2``: the tag the staging modules carry for a Kubernetes release."""
    match = re.fullmatch(r"v1\.(\d+\.\d+(?:-[0-9A-Za-z.]+)?)", version)
    if not match:
        raise ReleaseError(f"cannot derive staging module versions from Kubernetes {version!r}")
    return f"v0.{match.group(1)}"


@dataclass(frozen=True)
class Substitute:
    """A module version the proxy refuses, and the served one built instead (a deviation)."""

    module: str
    pinned: str
    used: str

    def __str__(self) -> str:
        return f"{self.module} {self.pinned} (not served) => {self.used}"


def build_go_mod(
    kubernetes_go_mod: str,
    version: str,
    substitutes: tuple[Substitute, ...] = (),
    standins: dict[str, str] | None = None,
) -> str:
    """The go.mod of a module that builds ``k8s.io/kubernetes@version`` from published modules.

    ``substitutes`` replace pinned requirements that the proxy does not serve; ``standins`` map
    modules it does not serve (staging modules or others) to the directory of an assembled
    stand-in.
    """
    standins = dict(standins or {})
    directives = _top_level_lines(kubernetes_go_mod, "go", "godebug", "toolchain")
    if not any(line.startswith("go ") for line in directives):
        raise ReleaseError(f"the go.mod of {KUBERNETES_MODULE} {version} has no `go` line")
    staging = staging_version(version)
    replaces = []
    for replace in parse_replaces(kubernetes_go_mod):
        if replace.is_local:
            module = replace.old.split()[0]
            target = standins.pop(module, None) or f"{module} {staging}"
            replaces.append(f"\t{module} => {target}")
        else:
            replaces.append(f"\t{replace.old} => {replace.new}")
    replaces += [f"\t{module} => {target}" for module, target in sorted(standins.items())]
    replaces += [f"\t{s.module} {s.pinned} => {s.module} {s.used}" for s in substitutes]
    lines = [
        f"module {BUILD_MODULE}",
        "",
        *directives,
        "",
        f"require {KUBERNETES_MODULE} {version}",
    ]
    if replaces:
        lines += ["", "replace (", *replaces, ")"]
    return "\n".join(lines) + "\n"


def go_directive(go_mod: str) -> str:
    """The Go version a go.mod needs (``go 1.27.0`` -> ``1.27.0``)."""
    for line in _top_level_lines(go_mod, "go"):
        return line.split()[1]
    raise ReleaseError("the go.mod has no `go` line")


def toolchain_directive(go_mod: str) -> str | None:
    """The toolchain a go.mod suggests (``toolchain go1.27.3``), if it names one."""
    for line in _top_level_lines(go_mod, "toolchain"):
        return line.split()[1]
    return None


def parse_requires(go_mod: str) -> list[tuple[str, str]]:
    """Every ``(module, version)`` a go.mod requires, single-line or in blocks."""
    found: list[tuple[str, str]] = []
    for line in _top_level_lines(go_mod, "require"):
        words = line.removeprefix("require").split()
        if len(words) == 2 and words[0] != "(":
            found.append((words[0], words[1]))
    return found


def local_replaced(go_mod: str) -> set[str]:
    """Modules a go.mod replaces with a directory: the staging modules of k8s.io/kubernetes."""
    return {r.old.split()[0] for r in parse_replaces(go_mod) if r.is_local}


def parse_replaces(go_mod: str) -> list[Replace]:
    """Every replace directive of a go.mod, single-line or in a block."""
    found: list[Replace] = []
    in_block = False
    for raw in go_mod.splitlines():
        line = _strip_comment(raw)
        if not line:
            continue
        if in_block:
            if line == ")":
                in_block = False
            elif "=>" in line:
                found.append(_replace(line))
        elif line in {"replace (", "replace("}:
            in_block = True
        elif line.startswith("replace ") and "=>" in line:
            found.append(_replace(line.removeprefix("replace ")))
    return found


def _replace(text: str) -> Replace:
    old, new = (part.strip() for part in text.split("=>", 1))
    return Replace(old=old, new=new)


def _top_level_lines(go_mod: str, *keywords: str) -> list[str]:
    """The directives named ``keywords`` (blocks kept whole), in their original order."""
    out: list[str] = []
    block: str | None = None
    for raw in go_mod.splitlines():
        line = _strip_comment(raw)
        if not line:
            continue
        if block is not None:
            if block in keywords:
                out.append(f"\t{line}" if line != ")" else line)
            if line == ")":
                block = None
            continue
        word = line.split()[0].rstrip("(")
        if line.endswith("("):
            block = word
            if word in keywords:
                out.append(f"{word} (")
        elif word in keywords:
            out.append(line)
    return out


def _strip_comment(line: str) -> str:
    return line.split("//", 1)[0].strip()
