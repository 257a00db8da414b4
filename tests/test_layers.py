"""Modules import only downwards: the layer map, and a check of every module's imports (ast).

A module may import its own layer and the layers below it, never one above. Across layers it
imports public names only: ``e2e_dra.releases``, not ``e2e_dra.releases._select``. At the bottom,
``e2e_dra.hostkit`` (atomic files, waits with a deadline) imports nothing of ours, and the process
supervisor (``e2e_dra.supervise``) nothing but it. The engine (``localupcluster``) stands alone: it
imports nothing of e2e-dra but those two, and its users hand it a logger and paths. (Importing
either runs ``e2e_dra/__init__.py`` first, which imports ``e2e_dra.errors``, itself standard
library only: checked below in a fresh interpreter.)
Imports under ``if TYPE_CHECKING:`` count too: a type is a dependency as well.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("host", ("e2e_dra.hostkit",)),
    ("processes", ("e2e_dra.supervise",)),
    (
        "base",
        (
            "e2e_dra",  # the package itself: its version and error types
            "e2e_dra.errors",
            "e2e_dra.settings",
            "e2e_dra._console",
            "e2e_dra._paths",
            "e2e_dra._platform",
            "e2e_dra._cache",
            "e2e_dra._gotool",
            "e2e_dra._urls",
        ),
    ),
    ("report", ("e2e_dra.report",)),  # reads artifacts: summaries in, HTML/trace/JUnit out
    ("versions", ("e2e_dra.versions",)),
    ("releases", ("e2e_dra.releases",)),
    ("node runtime", ("e2e_dra.provision",)),
    ("engine", ("e2e_dra.localupcluster",)),
    ("kube client", ("e2e_dra.kube", "e2e_dra.waits")),
    ("driver", ("e2e_dra.driver",)),
    ("subtests", ("e2e_dra.subtest", "e2e_dra.builder", "e2e_dra.subtest_kit", "e2e_dra.subtests")),
    (
        "suite",
        (
            "e2e_dra._suite",
            "e2e_dra.pytest_plugin",
            "e2e_dra.conftest",
            "e2e_dra.test_*",  # every suite's pytest module, today's and the next one's
        ),
    ),
    ("commands", ("e2e_dra.commands", "e2e_dra.cli")),
)
"""Lowest first. A name stands for that module and, for a package, everything under it; a name
ending in ``*`` for every module whose name starts so."""

STANDALONE: dict[str, set[str]] = {
    "host": set(),
    "processes": {"host"},
    "engine": {"host", "processes"},
}
"""Layers that import no other layer of ours, whatever their place, but the ones named: the engine
uses the host kit and the process supervisor, as the node runtime and the builds below it do."""

PACKAGES = ("e2e_dra",)


def _owner(module: str) -> tuple[int, str] | None:
    """(layer index, the layer's name for it) of the longest layer name ``module`` falls under."""
    best: tuple[int, str] | None = None
    for index, (_, names) in enumerate(LAYERS):
        for name in names:
            if _under(module, name) and (best is None or len(name) > len(best[1])):
                best = (index, name)
    return best


def _under(module: str, name: str) -> bool:
    if name.endswith("*"):
        return module.startswith(name[:-1])
    return module == name or module.startswith(name + ".")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: Path, module: str) -> list[tuple[int, str]]:
    """(line, imported module) for every import of ours in the file; ``from x import y`` also
    yields ``x.y`` (y may be a submodule)."""
    tree = ast.parse(path.read_text(), str(path))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{anchor}.{base}" if base else anchor
            found.append((node.lineno, base))
            found += [(node.lineno, f"{base}.{alias.name}") for alias in node.names]
    return [(line, name) for line, name in found if name.split(".")[0] in PACKAGES]


def _modules() -> list[Path]:
    files = []
    for package in PACKAGES:
        files += [p for p in (ROOT / package).rglob("*.py") if "_pb" not in p.parts]
    return sorted(files)


def _is_module(name: str) -> bool:
    path = ROOT / name.replace(".", "/")
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def violations() -> list[str]:
    found = []
    for path in _modules():
        module = _module_name(path)
        mine = _owner(module)
        if mine is None:
            found.append(f"{module}: in no layer (add it to LAYERS in {Path(__file__).name})")
            continue
        imported_modules = {
            # ``from x import name``: x; ``from x import submodule``: x.submodule
            (line, name if _is_module(name) or "." not in name else name.rpartition(".")[0])
            for line, name in _imports(path, module)
        }
        for line, imported_module in sorted(imported_modules):
            theirs = _owner(imported_module)
            if theirs is None or theirs[0] == mine[0]:
                continue
            where = f"{path.relative_to(ROOT)}:{line}"
            my_layer, their_layer = LAYERS[mine[0]][0], LAYERS[theirs[0]][0]
            if theirs[0] > mine[0]:
                found.append(f"{where}: {my_layer} imports {imported_module} ({their_layer})")
            elif my_layer in STANDALONE and their_layer not in STANDALONE[my_layer]:
                found.append(f"{where}: the {my_layer} stands alone but imports {imported_module}")
            rest = imported_module[len(theirs[1]) :].lstrip(".")
            if rest.startswith("_") or "._" in rest:
                found.append(f"{where}: {imported_module} is private to {theirs[1]}")
    return found


def test_modules_import_only_downwards_and_public_names() -> None:
    assert violations() == []


def import_graph() -> dict[str, set[str]]:
    """Module -> the modules of ours it imports (``from x import y``: ``x.y`` when that is a
    module, else ``x``), imports for type checking included."""
    graph: dict[str, set[str]] = {}
    for path in _modules():
        module = _module_name(path)
        graph[module] = set()
        found = _imports(path, module)
        for line, name in found:
            # ``from x import submodule`` imports the submodule, not (for this check) x itself
            submodules = [n for at, n in found if at == line and n.startswith(f"{name}.")]
            if any(_is_module(n) for n in submodules):
                continue
            target = name if _is_module(name) else name.rpartition(".")[0]
            if target != module and _is_module(target):
                graph[module].add(target)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The groups of modules that import each other, through any number of others (the strongly
    connected components of more than one module, Tarjan's algorithm without recursion)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.get(root, ()))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        while work:
            node, edges = work[-1]
            for nxt in edges:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    work.append((nxt, iter(sorted(graph.get(nxt, ())))))
                    break
                if nxt in stack:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    group = []
                    while True:
                        member = stack.pop()
                        group.append(member)
                        if member == node:
                            break
                    if len(group) > 1:
                        found.append(sorted(group))
    return found


def test_no_modules_import_each_other_even_for_types() -> None:
    """A loop (even one only ``if TYPE_CHECKING:``) means two modules are one concern split in
    two: neither can be read, tested or moved without the other."""
    assert cycles(import_graph()) == []


def test_an_import_loop_is_found() -> None:
    """The check can fail: a loop through three modules, and one of a module with itself."""
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"d"}}
    assert cycles(graph) == [["a", "b", "c"]]
    assert cycles({"x": {"y"}, "y": set()}) == []


def test_every_layer_name_exists() -> None:
    modules = [_module_name(path) for path in _modules()]
    missing = [
        name
        for _, names in LAYERS
        for name in names
        if not (_is_module(name) or (name.endswith("*") and any(_under(m, name) for m in modules)))
    ]
    assert missing == []


def test_a_new_suites_pytest_module_falls_in_the_suite_layer_by_its_name() -> None:
    index = {layer: i for i, (layer, _) in enumerate(LAYERS)}
    assert _owner("e2e_dra.test_kubelet_skew") == (index["suite"], "e2e_dra.test_*")
    # the pattern is the prefix as written, underscore included: this one is the package's
    assert _owner("e2e_dra.testing_aid") == (index["base"], "e2e_dra")


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("from e2e_dra.commands import releases\n", "versions imports e2e_dra.commands"),
        (
            "from e2e_dra.localupcluster import Cluster\n",
            "versions imports e2e_dra.localupcluster (engine)",
        ),
        ("from e2e_dra.releases._select import x\n", "is private to e2e_dra.releases"),
    ],
)
def test_an_upward_or_private_import_is_reported(
    source: str, expected: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The check can fail: the same code run on a lower module that reaches up."""
    versions = ROOT / "e2e_dra" / "versions.py"
    real = Path.read_text
    monkeypatch.setattr(
        Path, "read_text", lambda self, *a, **k: source if self == versions else real(self, *a, **k)
    )
    assert any(expected in v for v in violations()), violations()


def test_the_engine_reaching_into_e2e_dra_is_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    engine = ROOT / "e2e_dra" / "localupcluster" / "_log.py"
    real = Path.read_text
    monkeypatch.setattr(
        Path,
        "read_text",
        lambda self, *a, **k: (
            "from e2e_dra._console import say\n" if self == engine else real(self, *a, **k)
        ),
    )
    assert any("the engine stands alone but imports e2e_dra._console" in v for v in violations())


def test_the_engine_and_the_releases_name_the_same_components() -> None:
    """The engine keeps its own list (it imports nothing of ours); they must not drift apart."""
    from e2e_dra.localupcluster import KUBE_CLUSTER_COMPONENTS
    from e2e_dra.releases import SERVER_COMPONENTS

    assert SERVER_COMPONENTS == KUBE_CLUSTER_COMPONENTS


ENGINE_BELOW = {"e2e_dra", "e2e_dra.errors", "e2e_dra.hostkit", "e2e_dra.supervise"}


@pytest.mark.parametrize(
    ("module", "allowed"),
    [
        ("e2e_dra.hostkit", {"e2e_dra", "e2e_dra.errors", "e2e_dra.hostkit"}),
        ("e2e_dra.supervise", ENGINE_BELOW),
        ("e2e_dra.localupcluster", {*ENGINE_BELOW, "e2e_dra.localupcluster"}),
    ],
)
def test_the_bottom_layers_and_the_engine_load_nothing_else_of_e2e_dra(
    module: str, allowed: set[str]
) -> None:
    """They live under ``e2e_dra`` (so that they cannot clash with PyPI projects of the same
    names), which makes Python run the package's ``__init__`` first: that must stay light."""
    script = (
        f"import sys, {module}; "
        "print(' '.join(m for m in sys.modules if m.split('.')[0] == 'e2e_dra'))"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, cwd=ROOT
    )
    loaded = {
        name
        for name in done.stdout.split()
        if not any(name.startswith(f"{package}.") for package in allowed - {"e2e_dra"})
    }
    assert loaded <= allowed, sorted(loaded - allowed)


def test_the_wheel_installs_one_top_level_package() -> None:
    """The engine and the subtests live under ``e2e_dra``: an install adds one name to
    ``site-packages``, and cannot shadow another project's ``subtests`` or ``localupcluster``."""
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    include = project["tool"]["setuptools"]["packages"]["find"]["include"]
    top_level = sorted(p.parent.name for p in ROOT.glob("*/__init__.py"))
    assert include == ["e2e_dra*"]
    assert top_level == ["e2e_dra"]


MAX_LINES = 600
"""A module longer than this does more than one thing: split it by concern."""


def test_no_product_module_is_longer_than_the_limit() -> None:
    long = {
        str(path.relative_to(ROOT)): lines
        for path in _modules()
        if (lines := len(path.read_text().splitlines())) > MAX_LINES
    }
    assert long == {}, f"over {MAX_LINES} lines: {long}"
