"""The objects subtests create, as plain dicts with upstream's names, and the checks on them.

A subtest works with one :class:`Builder` per phase (``ctx.builder``), the face upstream's
subtests are written against; :class:`SubtestObjects` is what outlives the phases (names, labels,
tear-down), and ``SubtestObjects.builder(kube)`` makes each phase's builder. Each concern is its
own class, in its own private module, and the builder is all of them at once (each is one of
its base classes, so every method is written once, where it is implemented):

- ``_requests``: :func:`request`, one request of a claim (:class:`Request`), for
  ``b.external_claim(requests=[...])`` and ``b.pod_inline(requests=[...])``;
- ``_objects``: :class:`ObjectFactory`, names and object dicts (no client), :func:`labeled`,
  and the predicates on what the server answers (:func:`is_allocated`,
  :func:`is_unschedulable`);
- ``_api``: :class:`ObjectClient`, REST paths (:func:`object_path`, :func:`resource_path`),
  served API versions (:func:`served_version`, :class:`NotServed`), create (also as compact
  JSON, :func:`compact_json`), and objects by name;
- ``_pods``: :class:`Pods`, an ObjectClient with the waits on pods, the env check and exec;
- ``_teardown``: :class:`Sweeper`, an ObjectClient that sweeps the subtest's own objects
  (by :func:`label_selector`, and :func:`made_for` its pods) after it;
- ``_builder``: :class:`SubtestObjects`, and :class:`Builder`, which is an ObjectFactory, Pods
  and Sweeper over one phase's client.

Every object a builder creates carries the labels :data:`SUBTEST_LABEL` and :data:`SUITE_LABEL`.
:func:`retrying`, :class:`NotFound` and :class:`KubeError` come along: subtests retry, expect
by-name calls and look at what the server refused.

Import from here; the module layout behind these names may change.
"""

from e2e_dra.builder._api import (
    RESOURCES,
    NotServed,
    ObjectClient,
    compact_json,
    label_selector,
    object_path,
    resource_of,
    resource_path,
    served_version,
)
from e2e_dra.builder._builder import Builder, SubtestObjects
from e2e_dra.builder._objects import (
    DEFAULT_ENV,
    DEFAULT_PARAMETERS,
    DISRUPTION_ANNOTATION,
    IDLE_COMMAND,
    IMPLICIT_EXTENDED_RESOURCE_PREFIX,
    NON_ROOT_USER,
    RESOURCE_V1,
    SCHEDULING_V1BETA1,
    SUBTEST_LABEL,
    SUITE_LABEL,
    ObjectFactory,
    cluster_slice,
    driver_name,
    event_time,
    is_allocated,
    is_unschedulable,
    labeled,
)
from e2e_dra.builder._pods import POD_DELETE_TIMEOUT, POD_START_TIMEOUT, PodFailed, Pods
from e2e_dra.builder._requests import DEFAULT_REQUEST, Request, request
from e2e_dra.builder._teardown import (
    TEARDOWN_TIMEOUT,
    UNLABELLED,
    Leftovers,
    Pending,
    Sweeper,
    Written,
    made_for,
    wait_torn_down,
)
from e2e_dra.builder._views import claim_names
from e2e_dra.kube import KubeError, NotFound, retrying

__all__ = [
    "DEFAULT_ENV",
    "DEFAULT_PARAMETERS",
    "DEFAULT_REQUEST",
    "DISRUPTION_ANNOTATION",
    "IDLE_COMMAND",
    "IMPLICIT_EXTENDED_RESOURCE_PREFIX",
    "NON_ROOT_USER",
    "POD_DELETE_TIMEOUT",
    "POD_START_TIMEOUT",
    "RESOURCES",
    "RESOURCE_V1",
    "SCHEDULING_V1BETA1",
    "SUBTEST_LABEL",
    "SUITE_LABEL",
    "TEARDOWN_TIMEOUT",
    "UNLABELLED",
    "Builder",
    "KubeError",
    "Leftovers",
    "NotFound",
    "NotServed",
    "ObjectClient",
    "ObjectFactory",
    "Pending",
    "PodFailed",
    "Pods",
    "Request",
    "SubtestObjects",
    "Sweeper",
    "Written",
    "claim_names",
    "cluster_slice",
    "compact_json",
    "driver_name",
    "event_time",
    "is_allocated",
    "is_unschedulable",
    "label_selector",
    "labeled",
    "made_for",
    "object_path",
    "request",
    "resource_of",
    "resource_path",
    "retrying",
    "served_version",
    "wait_torn_down",
]
