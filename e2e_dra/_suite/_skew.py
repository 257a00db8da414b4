"""The kubelet skew matrix: the kubelet-last runs ``E2E_DRA_KUBELET_VERSION`` asks for.

One release (``1.35``, ``v1.35.4``), or none (the previous release), is the one ``kubelet-last``
suite of before: the same item ids and ``$ARTIFACTS/kubelet-last/``, the release resolved when
its versions step runs. A list (``1.35,1.36,v1.37.2``) or ``skew`` (every minor the version skew
policy allows under the version under test: n-1 to n-3) is a matrix: one cell per kubelet, each
a kubelet-last suite of its own (``kubelet-last-1.35``: its items, whose ids start with
``kubelet-1.35-``, its ARTIFACTS folder, summary and verdict), run one after the other on the
host's one cluster.

A matrix is resolved when the kubelet-last module is collected, before anything runs: the
version under test and each kubelet's newest served patch release are looked up (a few small
requests; nothing is fetched or built). An entry the skew policy refuses, or two entries naming
one release, then stop the run with one line, instead of failing a cell half an hour in; and each
cell runs the release it was resolved to, the one its summary names.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from e2e_dra._suite._steps import Suite
from e2e_dra._suite._upgrade import (
    KUBELET_LAST,
    KUBELET_VERSION_ENV,
    MAX_KUBELET_SKEW,
    KubeletLast,
    UpgradeSuite,
)
from e2e_dra.errors import E2EDRAError, InputError, VersionError
from e2e_dra.releases import ReleaseSource, plan_versions
from e2e_dra.settings import settings
from e2e_dra.versions import is_minor, parse_minor, parse_version

SKEW = "skew"
"""The value that asks for every kubelet minor the skew policy allows."""
NAMED_RELEASES = ("stable", "latest")
"""Names a single value may use, as ``E2E_DRA_KUBERNETES_VERSION`` does."""


@dataclass(frozen=True)
class Cell:
    """A suite as one module's tests run it; ``id`` starts the ids of its items (None: the
    module's only suite, whose ids are the plan's own)."""

    suite: Suite[Any]
    id: str | None = None


def kubelet_values(text: str | None) -> tuple[KubeletLast, ...]:
    """The kubelet-last variants ``text`` (the variable's value) names, in order, checked in
    form only (releases are resolved later): read when the run starts, so that a typo stops it
    with one line naming the variable and the entry."""
    if text is None:
        return (KubeletLast(),)
    if text.strip() == SKEW:
        return tuple(KubeletLast(skew=n) for n in range(1, MAX_KUBELET_SKEW + 1))
    entries = [entry.strip() for entry in text.split(",")]
    if len(entries) == 1:  # as before the matrix: checked, then kept as given
        _checked(entries[0], text, single=True)
        return (KubeletLast(kubelet=entries[0]),)
    values = [KubeletLast(kubelet=_checked(entry, text)) for entry in entries]
    names = [value.kubelet for value in values]
    twice = sorted({name for name in names if name is not None and names.count(name) > 1})
    if twice:
        raise InputError(
            f"{KUBELET_VERSION_ENV}={text!r} names {', '.join(twice)} twice: name each kubelet once"
        )
    return tuple(values)


def is_matrix(text: str | None) -> bool:
    """Whether ``text`` asks for several kubelet-last runs (a list, or ``skew``)."""
    return text is not None and (text.strip() == SKEW or "," in text)


def _checked(entry: str, text: str, *, single: bool = False) -> str:
    """``entry`` of ``text`` as a cell is named after it: ``1.35`` for a minor (``v1.35`` too),
    the tag of a release (``v1.35.4``); anything else is one line naming it. A ``single``
    value may also be ``stable`` or ``latest``, as it always could."""
    if not entry:
        raise InputError(
            f"{KUBELET_VERSION_ENV}={text!r} has an empty entry: separate the releases with "
            "single commas (1.35,1.36,v1.37.2)"
        )
    if entry == SKEW:
        raise InputError(
            f"{KUBELET_VERSION_ENV}={text!r}: {SKEW} already names every kubelet the skew policy "
            "allows; give it alone, or list the releases"
        )
    if single and entry in NAMED_RELEASES:
        return entry
    if is_minor(entry):
        return str(parse_minor(entry))
    try:
        version = parse_version(entry)
    except VersionError:
        version = None
    if version is None or not version.is_release:
        raise InputError(
            f"{KUBELET_VERSION_ENV}={text!r}: {entry!r} is not a release (v1.35.4) or MAJOR.MINOR "
            f"(1.35); give one, a comma-separated list of them, or {SKEW}"
        )
    return version.tag


def cells_of(suite: Suite[Any], text: str | None) -> list[Cell]:
    """The runs of ``suite`` a module's tests make: the suite itself, except for a kubelet-last
    that does not name its kubelet, whose kubelet ``text`` (``E2E_DRA_KUBELET_VERSION``) names:
    one suite, or a matrix's cells (resolved here, see the module's docstring). A matrix that
    cannot be resolved is one line (:class:`~e2e_dra.errors.InputError`) naming the variable."""
    if not (isinstance(suite, UpgradeSuite) and isinstance(suite.variant, KubeletLast)):
        return [Cell(suite)]
    if suite.variant.pinned:  # a variant that names its kubelet keeps it
        return [Cell(suite)]
    values = kubelet_values(text)
    if not is_matrix(text):
        return [Cell(dataclasses.replace(suite, variant=values[0]))]
    from e2e_dra._suite._run_releases import run_release_source  # the releases: heavy

    source = run_release_source(settings())
    try:
        current = plan_versions(source).current
    except E2EDRAError as exc:
        raise InputError(
            f"{KUBELET_VERSION_ENV}={text!r}: the version under test, which its kubelets are "
            f"resolved against, cannot be told: {exc}"
        ) from None
    return [
        Cell(dataclasses.replace(suite, variant=value), f"kubelet-{name}")
        for name, value in resolve_matrix(values, current, source)
    ]


class Cells:
    """The cells of each module's suite (:func:`cells_of`), told once. Why they cannot be told
    is kept in ``error``, for the plugin to stop the run with once collection is over: raised
    while pytest collects a module, it would be a collection error with a traceback."""

    def __init__(self) -> None:
        self._told: dict[str, list[Cell]] = {}
        self.error: str | None = None

    def __call__(self, suite: Suite[Any]) -> list[Cell]:
        if suite.name not in self._told:
            try:
                self._told[suite.name] = cells_of(suite, settings().kubelet_version)
            except E2EDRAError as exc:
                self.error, self._told[suite.name] = str(exc), []
        return self._told[suite.name]


def resolve_matrix(
    values: Sequence[KubeletLast], current: str, source: ReleaseSource
) -> list[tuple[str, KubeletLast]]:
    """Each of ``values`` with the exact release ``source`` resolves it to under the version
    under test ``current``, named for its cell (``1.35`` as given, the minor a ``skew`` names)
    and as its own suite (``kubelet-last-1.35``); refused where the skew policy does not allow
    it, or where two name one release."""
    cells: list[tuple[str, KubeletLast]] = []
    named: dict[str, str] = {}  # release -> the entry that named it
    for value in values:
        name = value.kubelet_spec(current)
        try:
            version = value.kubelet_version(current, source)
        except InputError:
            raise
        except E2EDRAError as exc:
            raise InputError(f"{KUBELET_VERSION_ENV}: {name} cannot be resolved: {exc}") from None
        if name is None or version is None:  # a matrix names every kubelet
            raise AssertionError(f"{value} names no kubelet")
        if version in named:
            raise InputError(
                f"{KUBELET_VERSION_ENV}: {named[version]} and {name} both name {version}: name "
                "each kubelet once"
            )
        named[version] = name
        pinned = dataclasses.replace(
            value, suite=f"{KUBELET_LAST}-{name}", kubelet=version, skew=None
        )
        cells.append((name, pinned))
    return cells
