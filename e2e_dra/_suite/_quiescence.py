"""The quiescence net: once a DRA object has settled, a write nobody asked for is a finding.

A controller that keeps rewriting a field of an object nothing changed (a status that flaps), or
two writers that keep taking a field from each other (two controllers, or two releases of one,
each with its own idea of the field), make the object churn forever: every informer hears of it,
every reader may see either value. The API says who wrote what: server-side apply keeps, for
every field, the field managers that own it (``metadata.managedFields``), and stamps the entry of
the manager whose write changed the object with the time of that write. So every version of every
ResourceClaim, ResourceSlice and DeviceTaintRule the watches deliver, in the order the server
wrote them, is compared with the version before it, field by field (leaf by leaf: a list whose
items the managed fields key, ``k:{...}``, item by item, else as one value), and each changed
field is put down with who wrote it: the managers that own it now (a write takes what it
changes), else, for a field that went, the managers whose entry the write stamped.

An object's *story* starts when it is first seen and starts again whenever

- the suite writes it: a changed field, or a stamped entry, of a field manager the suite's own
  clients used (:meth:`~e2e_dra.kube.Kube.field_managers`): what the test asked for, the cluster
  may answer as it must;
- a version brings something new: a field takes a value it never had since the object was first
  seen (a new consumer, another allocation, devices republished otherwise), timestamps and whole
  numbers aside (clocks and counters move on by themselves: a condition's
  ``lastTransitionTime``, a pool's ``generation``). Normal work is such news: a claim allocated
  for a pod, reserved, released and deallocated, the same claim allocated for the next pod (a new
  uid in ``reservedFor``), the kubelet or a driver writing a device's status once, the resource
  claim controller deleting a claim, a driver republishing its slices at the next generation.

Within one story, and within :data:`WINDOW` seconds, a field

- **flaps** when it went back to a value it had before :data:`FLAP_RETURNS` times (v1, v2, v1,
  v2, v1, v2: with nothing new and no test write in between, the field is written back and forth
  for no reason; a status condition that flaps counts like any field);
- is **fought over** when its writer changed :data:`FIGHT_HANDOVERS` times (A, B, A, B: two
  managers, each overwriting the other), counting the changes whose writer is known and single.

A normal story has at most one or two returns per field (a claim's finalizer removed with its
allocation, and added back for its next pod before that pod's new allocation restarts the story)
and at most one hand-over; a write loop makes hundreds. Each finding names the object, the
fields, their values and the managers that wrote them; it belongs to the subtest the object
belongs to (its label, else the driver that allocated or published it) and fails that subtest's
next phase, once per object and rule. Memory is bounded: :data:`OBJECTS` objects (the ones seen
longest ago are forgotten first), :data:`HISTORY` changes per field, :data:`KNOWN` values per
field.
"""

from __future__ import annotations

import json
import logging
import re
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from e2e_dra._suite._nets import LISTED, Finding, claim_owner
from e2e_dra.builder import SUBTEST_LABEL

WINDOW = 300.0
"""Seconds within which the changes of one field count together: a story that lasts longer (a
settled object the cluster steps restart around) does not add up its rare changes."""
FLAP_RETURNS = 4
"""Returns to an earlier value that make a flap: v1, v2, v1, v2, v1, v2 (a normal story: two)."""
FIGHT_HANDOVERS = 3
"""Changes of writer that make a fight: A, B, A, B (a normal story: one)."""
HISTORY = 16
"""Changes kept per field: more than either rule needs."""
KNOWN = 32
"""Values remembered per field to tell news from returns; beyond them, the oldest go."""
FIELDS = 256
"""Fields with changes kept per object; beyond them, the ones changed longest ago go."""
OBJECTS = 1000
"""Objects followed at once; beyond them, the ones seen longest ago are forgotten."""
SHOWN_FIELDS = 4
SHOWN_VALUE = 60
BOOKKEEPING = frozenset({"resourceVersion", "managedFields", "generation"})
"""Metadata the server keeps for itself: it changes with every write, or with every spec write."""
ABSENT = "<absent>"
TIMESTAMP = re.compile(r'^"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)"$')
WHOLE_NUMBER = re.compile(r"^-?\d+$")

Path = tuple[str, ...]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Leaf:
    """One field of one version: its value (canonical JSON) and the managers that own it."""

    value: str
    owners: frozenset[str]


@dataclass(frozen=True)
class Change:
    """One field changed by one version: when it was seen, to what, and by whom (empty: the
    API does not say)."""

    at: float
    resource_version: str
    before: str
    after: str
    writers: frozenset[str]


@dataclass
class _Story:
    """What is kept of one object: its last version's fields, and its story's changes."""

    api_version: str
    resource_version: str
    fields: dict[Path, Leaf]
    stamps: dict[tuple[str, str, str], str]
    changes: dict[Path, deque[Change]] = field(default_factory=dict)
    known: dict[Path, dict[int, None]] = field(default_factory=dict)  # ordered sets of hashes


def leaves(obj: Mapping[str, Any]) -> dict[Path, Leaf]:
    """Every field of ``obj`` (``apiVersion``, ``kind`` and the server's bookkeeping aside), with
    its owners by the object's managed fields (the entries of its own ``apiVersion``: a field set
    of another version may spell its paths otherwise).

    A list whose items the managed fields key (``k:{"uid":...}``) is taken item by item, each
    item named by its key (``reservedFor[uid=u1]``), plus the list's order of keys as a field of
    its own; any other list is one value (atomic lists and sets are written whole)."""
    metadata = {k: v for k, v in (obj.get("metadata") or {}).items() if k not in BOOKKEEPING}
    body = {k: v for k, v in obj.items() if k not in ("apiVersion", "kind", "metadata")}
    body["metadata"] = metadata
    api_version = obj.get("apiVersion")
    trees = [
        (entry.get("manager") or "", entry.get("fieldsV1") or {})
        for entry in (obj.get("metadata") or {}).get("managedFields") or []
        if not api_version or entry.get("apiVersion") == api_version
    ]
    found: dict[Path, Leaf] = {}
    _walk(body, (), trees, frozenset(), found)
    return found


def _walk(
    value: Any,
    at: Path,
    trees: list[tuple[str, dict]],
    whole: frozenset[str],
    found: dict[Path, Leaf],
) -> None:
    """Put the leaves of ``value`` (at ``at``) into ``found``. ``trees``: each manager's field
    set at ``at``; ``whole``: the managers that own all of ``value`` (an atomic field above)."""
    if isinstance(value, dict) and value:
        for key, sub in value.items():
            inner, owners_all = _descend(trees, f"f:{key}")
            _walk(sub, (*at, key), inner, whole | owners_all, found)
        return
    if isinstance(value, list) and value:
        keyed = _keyed_items(value, trees)
        if keyed is not None:
            found[at] = Leaf(
                _canonical([label for label, _, _ in keyed]),
                whole | {manager for manager, _ in trees},
            )
            for label, item, item_trees in keyed:
                inner = [(m, n) for m, n in item_trees if n]
                owners_all = frozenset(m for m, n in item_trees if not n)
                _walk(item, (*at, label), inner, whole | owners_all, found)
            return
    found[at] = Leaf(_canonical(value), whole | {manager for manager, _ in trees})


def _descend(
    trees: list[tuple[str, dict]], name: str
) -> tuple[list[tuple[str, dict]], frozenset[str]]:
    """The managers' field sets below ``name``, and the managers that own all of it (``{}``)."""
    inner: list[tuple[str, dict]] = []
    owners_all: set[str] = set()
    for manager, node in trees:
        child = node.get(name)
        if isinstance(child, dict):
            if child:
                inner.append((manager, child))
            else:
                owners_all.add(manager)
    return inner, frozenset(owners_all)


def _keyed_items(
    items: list, trees: list[tuple[str, dict]]
) -> list[tuple[str, dict, list[tuple[str, dict]]]] | None:
    """Each item of a keyed list with its label and each manager's field set for it; None when
    the list is not keyed (some item matches no ``k:`` entry of any manager)."""
    entries: list[tuple[str, dict, dict]] = []  # (manager, key, field set)
    for manager, node in trees:
        for name, sub in node.items():
            if name.startswith("k:") and isinstance(sub, dict):
                try:
                    key = json.loads(name[2:])
                except ValueError:
                    continue
                if isinstance(key, dict):
                    entries.append((manager, key, sub))
    if not entries:
        return None
    keyed = []
    for item in items:
        if not isinstance(item, dict):
            return None
        mine = [
            (manager, key, sub)
            for manager, key, sub in entries
            if all(item.get(k) == v for k, v in key.items())
        ]
        if not mine:
            return None
        key = max((key for _, key, _ in mine), key=len)  # every key field the item has
        label = "[" + ",".join(f"{k}={key[k]}" for k in sorted(key)) + "]"
        keyed.append((label, item, [(manager, sub) for manager, _, sub in mine]))
    return keyed


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def stamps(obj: Mapping[str, Any]) -> dict[tuple[str, str, str], str]:
    """Each managed-fields entry (manager, operation, subresource) with its time and the fields
    it owns: a write changes its entry's time, or within the same second (times are whole
    seconds) what it owns."""
    return {
        (e.get("manager") or "", e.get("operation") or "", e.get("subresource") or ""): str(
            e.get("time") or ""
        )
        + _canonical(e.get("fieldsV1"))
        for e in (obj.get("metadata") or {}).get("managedFields") or []
    }


def dotted(path: Path) -> str:
    """``("status", "devices", "[device=d]", "data")`` as ``status.devices[device=d].data``."""
    text = ""
    for part in path:
        text += part if part.startswith("[") or not text else f".{part}"
    return text or "the object"


def _clock_or_counter(value: str) -> bool:
    """Whether a new value of a field is no news: a timestamp or a whole number."""
    return bool(TIMESTAMP.match(value) or WHOLE_NUMBER.match(value))


def returns(changes: Iterable[Change]) -> int:
    """How often the field went back to a value it had earlier in ``changes``."""
    count, had = 0, set()
    for change in changes:
        had.add(change.before)
        if change.after in had:
            count += 1
        had.add(change.after)
    return count


def handovers(changes: Iterable[Change]) -> int:
    """How often the field's (known, single) writer changed from one change to the next."""
    count, last = 0, None
    for change in changes:
        if len(change.writers) != 1:
            continue
        if last is not None and change.writers != last:
            count += 1
        last = change.writers
    return count


class Quiescence:
    """Follows every version of the DRA objects the watches deliver; says what flaps or is
    fought over (:meth:`take`).

    ``owner``: the subtest an object belongs to; ``asked``: the field managers of the suite's own
    writes now (a write by one of them restarts the object's story).
    """

    def __init__(
        self,
        owner: Callable[[dict], str | None],
        asked: Callable[[], Collection[str]],
        *,
        clock: Callable[[], float] = time.monotonic,
        objects: int = OBJECTS,
    ) -> None:
        self._owner = owner
        self._asked = asked
        self._clock = clock
        self._objects = objects
        self._lock = threading.Lock()  # the watches of several kinds call in at once
        self._stories: OrderedDict[tuple[str, str], _Story] = OrderedDict()
        self._found: list[Finding] = []
        self._said: set[tuple[str, str]] = set()
        self._broken = False  # a version could not be followed: said once

    def seen(self, event: str, obj: dict) -> None:
        """One version of an object, as a watch delivers it (``event``: the watch event's type,
        or ``LISTED`` for a list's items), in the order the server wrote them.

        A version this net cannot follow must not break the watch that feeds it (the claim
        watch feeds other nets too): it is said once, as a finding of nobody's, and the net
        goes on with the next."""
        try:
            self._seen(event, obj)
        except Exception as exc:
            logger.exception("quiescence net: a version it could not follow")
            with self._lock:
                if not self._broken:
                    self._broken = True
                    self._found.append(
                        Finding(
                            None,
                            "safety net not working: the quiescence net could not follow a "
                            f"version of {obj.get('kind')} "
                            f"{(obj.get('metadata') or {}).get('name')}: "
                            f"{type(exc).__name__}: {exc}",
                        )
                    )

    def _seen(self, event: str, obj: dict) -> None:
        meta = obj.get("metadata") or {}
        uid, kind = meta.get("uid"), obj.get("kind") or "object"
        if not uid or event not in (LISTED, "ADDED", "MODIFIED", "DELETED"):
            return  # a bookmark, or an error
        key = (kind, uid)
        with self._lock:
            if event == "DELETED":
                self._stories.pop(key, None)
                return
            story = self._stories.get(key)
            version = str(meta.get("resourceVersion") or "")
            if story is not None:
                self._stories.move_to_end(key)
                if story.resource_version == version:
                    return
            fields, stamped_now = leaves(obj), stamps(obj)
            if story is None or story.api_version != obj.get("apiVersion"):
                self._stories[key] = _Story(
                    str(obj.get("apiVersion")), version, fields, stamped_now
                )
                while len(self._stories) > self._objects:
                    self._stories.popitem(last=False)
                return
            self._next(story, obj, version, fields, stamped_now)

    def take(self) -> list[Finding]:
        """What was found since the last call."""
        with self._lock:
            found, self._found = self._found, []
        return found

    def _next(
        self,
        story: _Story,
        obj: dict,
        version: str,
        fields: dict[Path, Leaf],
        stamped_now: dict[tuple[str, str, str], str],
    ) -> None:
        """Put down what ``obj`` changed since the story's last version, and judge it."""
        stamped = frozenset(k[0] for k, t in stamped_now.items() if story.stamps.get(k) != t)
        # a manager whose write left it owning nothing has no entry any more: it wrote, too
        stamped |= frozenset(k[0] for k in story.stamps.keys() - stamped_now.keys())
        changed: dict[Path, Change] = {}
        now = self._clock()
        for path in story.fields.keys() | fields.keys():
            was, leaf = story.fields.get(path), fields.get(path)
            before = was.value if was is not None else ABSENT
            after = leaf.value if leaf is not None else ABSENT
            if before != after:
                writers = leaf.owners if leaf is not None and leaf.owners else stamped
                changed[path] = Change(now, version, before, after, writers)
        story.resource_version, story.fields, story.stamps = version, fields, stamped_now
        if not changed:
            return
        writers = stamped.union(*(c.writers for c in changed.values()))
        news = [self._learn(story, path, change) for path, change in changed.items()]
        if writers & set(self._asked()):
            story.changes.clear()  # the test asked for it: what follows is a new story
            return
        if any(news):
            story.changes.clear()  # the world changed: a new story starts with this version
        for path, change in changed.items():
            kept = story.changes.setdefault(path, deque(maxlen=HISTORY))
            kept.append(change)
            while kept and kept[0].at < now - WINDOW:
                kept.popleft()
        while len(story.changes) > FIELDS:
            oldest = min(story.changes, key=lambda p: story.changes[p][-1].at)
            del story.changes[oldest]
        self._judge(story, obj, changed)

    @staticmethod
    def _learn(story: _Story, path: Path, change: Change) -> bool:
        """Remember the field's values; whether its new one is news."""
        known = story.known.setdefault(path, {})
        new = hash(change.after) not in known and hash(change.after) != hash(change.before)
        for value in (change.before, change.after):
            known.pop(hash(value), None)
            known[hash(value)] = None
        while len(known) > KNOWN:
            known.pop(next(iter(known)))
        return new and not _clock_or_counter(change.after)

    def _judge(self, story: _Story, obj: dict, changed: Mapping[Path, Change]) -> None:
        flapping = [p for p in changed if returns(story.changes[p]) >= FLAP_RETURNS]
        fought = [p for p in changed if handovers(story.changes[p]) >= FIGHT_HANDOVERS]
        for rule, paths in (("fight", fought), ("flap", flapping)):
            if not paths:
                continue
            key = (obj["metadata"]["uid"], rule)
            if key in self._said:
                continue
            self._said.add(key)
            self._found.append(Finding(self._whose(obj), _message(rule, obj, story, paths)))

    def _whose(self, obj: dict) -> str | None:
        try:
            return self._owner(obj)
        except Exception:  # the finding still counts, as nobody's
            return None


def _message(rule: str, obj: dict, story: _Story, paths: list[Path]) -> str:
    meta = obj["metadata"]
    name = f"{meta['namespace']}/{meta['name']}" if meta.get("namespace") else meta.get("name")
    described = [_described(rule, path, list(story.changes[path])) for path in paths]
    if len(described) > SHOWN_FIELDS:
        more = len(described) - SHOWN_FIELDS
        described = [*described[:SHOWN_FIELDS], f"and {more} more field(s)"]
    what = (
        "two field managers keep taking fields from each other"
        if rule == "fight"
        else "fields keep going back and forth"
    )
    return (
        f"quiescence net, rule '{rule}': {obj.get('kind')} {name} settled, yet {what} with "
        f"nothing new and no write by the test in between (resourceVersion "
        f"{story.resource_version}): " + "; ".join(described)
    )


def _described(rule: str, path: Path, changes: list[Change]) -> str:
    values: list[str] = []
    for change in changes:
        for value in (change.before, change.after):
            if value not in values:
                values.append(value)
    managers = sorted({m for c in changes for m in c.writers}) or ["(not told)"]
    seconds = changes[-1].at - changes[0].at
    count = f"{handovers(changes)} hand-overs" if rule == "fight" else f"{returns(changes)} returns"
    return (
        f"{dotted(path)}: {len(changes)} changes in {seconds:.1f} s ({count}) between "
        + ", ".join(_shown(v) for v in values[:3])
        + (f" and {len(values) - 3} more" if len(values) > 3 else "")
        + f", written by {', '.join(managers)}"
    )


def _shown(value: str) -> str:
    return value if len(value) <= SHOWN_VALUE else value[: SHOWN_VALUE - 3] + "..."


def dra_owner(obj: dict, drivers: Mapping[str, str]) -> str | None:
    """The subtest an object belongs to: by its subtest label; else a claim by the driver that
    allocated it (:func:`claim_owner`), a slice by the driver that publishes it."""
    labelled = ((obj.get("metadata") or {}).get("labels") or {}).get(SUBTEST_LABEL)
    if labelled in drivers:
        return labelled
    if obj.get("kind") == "ResourceClaim":
        return claim_owner(obj, drivers)
    driver = (obj.get("spec") or {}).get("driver")
    return next((name for name, theirs in drivers.items() if theirs == driver), None)
