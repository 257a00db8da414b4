"""A served Kubernetes release laid out as a developer's checkout (``e2e-dra source``).

Kubernetes developers change a checkout: ``k8s.io/kubernetes`` at the root and each staging module
under ``staging/src/k8s.io/<name>``, which the root go.mod replaces with those directories, so a
change to the allocator (``dynamic-resource-allocation``) or to the API types (``api``) is built
into every command that uses it. The Go module proxy serves the root module without ``staging/``
and each staging module on its own; this puts them back together as one git commit tagged with the
release, so that ``git describe`` (and so ``hack/print-workspace-status.sh``) names a change the way
upstream's build would: ``v1.38.0-beta.0-dirty``, or ``v1.38.0-beta.0.1+<commit>`` once committed.

What the proxy refuses is built the way this machine builds the release itself
(:meth:`~e2e_dra.releases.GoBuildSource.recipe`): a refused staging module assembled in its staging
directory; a moved package's stand-in under ``.e2e-dra/standins/`` and a refused version replaced
by an older served one, both by a ``replace`` appended to go.mod; a staging module that no command
links (examples, test helpers) as a go.mod alone. Each is a deviation from the release and is
written down in the commit (``.e2e-dra/source.json``, ``.e2e-dra/README.md``).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from e2e_dra.errors import InputError, UnbuildableRelease
from e2e_dra.releases._checkout_build import OURS, STANDINS, TREE_ENV, git
from e2e_dra.releases._gobuild import BUILT_COMMANDS, UNLINKED_STAGING, GoBuildSource, Recipe
from e2e_dra.releases._gomodule import go_directive, local_replaced, staging_version
from e2e_dra.releases._goproxy import served_substitutes
from e2e_dra.releases._stamp import copy_writable

logger = logging.getLogger(__name__)

RECORD = OURS / "source.json"
STAGING = Path("staging") / "src"


@dataclass(frozen=True)
class Checkout:
    """A tree :func:`write_checkout` wrote."""

    path: Path
    version: str
    commit: str  # the one commit, tagged with ``version``
    deviations: tuple[str, ...]


def write_checkout(source: GoBuildSource, version: str, dest: Path) -> Checkout:
    """Write Kubernetes ``version`` as a checkout into ``dest`` (which must not exist, or be empty).

    The tree is written beside ``dest`` and renamed into place once committed: an interrupted or
    failed write leaves nothing at ``dest``.
    """
    dest = Path(dest).absolute()
    if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
        raise InputError(f"{dest} exists and is not an empty directory; name a new directory")
    if not dest.parent.is_dir():
        raise InputError(f"{dest.parent} is not a directory; create it or name another DIR")
    tag = source.release_tag(version)
    partial = dest.parent / f".{dest.name}.partial-{os.getpid()}"
    shutil.rmtree(partial, ignore_errors=True)
    try:
        log = source.cache_dir / ".logs" / f"{tag}-checkout.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        recipe = source.recipe(tag, partial / STANDINS, log)
        deviations = _lay_out(source, recipe, partial, log)
        _check_it_loads(recipe, partial, log)
        commit = _commit(partial, recipe, deviations)
        if dest.exists():
            dest.rmdir()
        partial.rename(dest)
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    logger.info(f"Kubernetes {tag} written to {dest} as a checkout (commit {commit[:14]})")
    return Checkout(path=dest, version=tag, commit=commit, deviations=tuple(deviations))


def _lay_out(source: GoBuildSource, recipe: Recipe, tree: Path, log: Path) -> list[str]:
    """The release's tree with its staging modules in place; the deviations it needed."""
    copy_writable(recipe.module_src, tree)
    _restore_executable_bits(tree)
    staging = sorted(local_replaced(recipe.go_mod))
    published = staging_version(recipe.version)
    _, refused = served_substitutes(
        source.proxy.base_url,
        [(m, published) for m in staging if m not in recipe.standins],
        allow_older=False,
    )
    refused_modules = {module for module, _ in refused}
    deviations = list(recipe.deviations)
    go_line = go_directive(recipe.go_mod)
    for module in staging:
        into = tree / STAGING / module
        if module in recipe.standins:
            shutil.move(str(recipe.standins[module][1]), into)
        elif module not in refused_modules:
            downloaded = source.download(module, published, log, recipe.toolchain)
            copy_writable(downloaded, into)
        elif module in UNLINKED_STAGING:
            into.mkdir(parents=True)
            (into / "go.mod").write_text(f"module {module}\n\ngo {go_line}\n")
            deviations.append(
                f"{module} {published} (not served) => a go.mod without packages: no command "
                "links it (examples and test helpers)"
            )
        else:
            raise UnbuildableRelease(
                f"Kubernetes {recipe.version} cannot be laid out as a checkout here: the Go module "
                f"proxy {source.proxy.base_url} refuses its staging module {module} {published}"
            )
    replaces = [
        f"\t{module} => ./{STANDINS / module}"
        for module in sorted(recipe.standins)
        if module not in staging
    ]
    replaces += [f"\t{s.module} {s.pinned} => {s.module} {s.used}" for s in recipe.substitutes]
    if replaces:
        with (tree / "go.mod").open("a") as go_mod:
            go_mod.write(
                f"\n// e2e-dra: what the Go module proxy here does not serve ({OURS}/README.md)\n"
                "replace (\n" + "\n".join(replaces) + "\n)\n"
            )
    _write_record(tree, recipe, deviations)
    return deviations


def _restore_executable_bits(tree: Path) -> None:
    """Make each script (a file that starts with ``#!``) executable, as it is in a checkout.

    Module zips keep no file modes, and upstream's tools run the scripts by path: its
    ``test/e2e_dra`` runs ``hack/print-workspace-status.sh``, ``make`` runs ``hack/*.sh``."""
    for root, _, files in os.walk(tree):
        for name in files:
            path = Path(root, name)
            if path.is_symlink():
                continue
            with open(path, "rb") as file:
                if file.read(2) != b"#!":
                    continue
            path.chmod(path.stat().st_mode | 0o111)


def _write_record(tree: Path, recipe: Recipe, deviations: list[str]) -> None:
    upstream = str((recipe.info.get("Origin") or {}).get("Hash", ""))
    record = {
        "version": recipe.version,
        "upstream_commit": upstream,
        "released": str(recipe.info.get("Time", "")),
        "go": recipe.toolchain.name,
        "deviations": deviations,
    }
    (tree / OURS).mkdir(exist_ok=True)
    (tree / RECORD).write_text(json.dumps(record, indent=1) + "\n")
    listed = "".join(f"- {d}\n" for d in deviations) or "- none\n"
    (tree / OURS / "README.md").write_text(
        f"# Kubernetes {recipe.version}, laid out as a checkout by e2e-dra\n\n"
        f"Upstream commit {upstream or '(not said by the proxy)'}. The root module and each "
        f"staging module (`{STAGING}/k8s.io/*`) are the Go module proxy's copies of the "
        "release. Build a change with `KUBERNETES_SOURCE_DIR=<this tree>` (see e2e-dra's "
        'README, "Testing your Kubernetes change").\n\n'
        "Where the proxy here refuses a module, this tree differs from the release:\n\n" + listed
    )


def _check_it_loads(recipe: Recipe, tree: Path, log: Path) -> None:
    """``go list`` of every command, before the commit: a tree that does not load is said now,
    and the go.sum lines of the replaced versions are part of the commit, not a change."""
    from e2e_dra._gotool import go_env, run_go

    run_go(
        ["list", "-deps", *(f"./cmd/{c}" for c in BUILT_COMMANDS)],
        cwd=tree,
        what=f"loading the commands of the {recipe.version} checkout",
        log=log,
        env=go_env(**TREE_ENV),
        toolchain=recipe.toolchain,
    )


def _commit(tree: Path, recipe: Recipe, deviations: list[str]) -> str:
    """One commit of the whole tree, dated and tagged as the release: the same release and
    deviations always make the same commit."""
    when = str(recipe.info.get("Time", "")) or "1970-01-01T00:00:00Z"
    env = {
        "GIT_AUTHOR_NAME": "e2e-dra",
        "GIT_AUTHOR_EMAIL": "e2e-dra@localhost",
        "GIT_COMMITTER_NAME": "e2e-dra",
        "GIT_COMMITTER_EMAIL": "e2e-dra@localhost",
        "GIT_AUTHOR_DATE": when,
        "GIT_COMMITTER_DATE": when,
    }
    upstream = str((recipe.info.get("Origin") or {}).get("Hash", "")) or "unknown"
    message = (
        f"Kubernetes {recipe.version} (upstream commit {upstream}), from the Go module proxy\n"
    )
    if deviations:
        message += f"\nDeviations ({OURS}/README.md):\n" + "".join(f"- {d}\n" for d in deviations)
    git(tree, "init", "-q", "-b", "master")
    git(tree, "add", "-A")
    git(tree, "commit", "-q", "--no-verify", "-m", message, env=env)
    git(tree, "tag", recipe.version)
    return git(tree, "rev-parse", "HEAD").strip()


_RECORD_LIMIT = 1 << 20


def recorded_deviations(tree: Path) -> tuple[str, ...]:
    """The deviations ``e2e-dra source`` wrote into ``tree`` (none in any other checkout)."""
    record = tree / RECORD
    if not record.is_file():
        return ()
    with record.open("rb") as file:
        text = file.read(_RECORD_LIMIT + 1)
    try:
        if len(text) > _RECORD_LIMIT:
            raise ValueError(f"more than {_RECORD_LIMIT} bytes")
        deviations = json.loads(text)["deviations"]
        if not isinstance(deviations, list) or not all(isinstance(d, str) for d in deviations):
            raise ValueError("its deviations are not a list of strings")
    except (ValueError, KeyError, TypeError) as exc:
        raise InputError(
            f"{record} is not the record e2e-dra source writes ({exc}); restore it from the "
            "tree's first commit (git checkout <release tag> -- .e2e-dra) or remove it"
        ) from None
    return tuple(f"checkout: {d}" for d in deviations)
