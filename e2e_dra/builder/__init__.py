"""The objects subtests create, as plain dicts with upstream's names, and the checks on them.

A subtest works with one :class:`Builder` (``ctx.builder``), the face upstream's subtests are
written against. Behind it each concern is its own class, in its own private module:

- ``_objects``: :class:`ObjectFactory`, names and object dicts (no client), and the predicates
  on what the server answers (:func:`is_allocated`, :func:`is_unschedulable`);
- ``_api``: :class:`ObjectClient`, REST paths (:func:`object_path`), served API versions
  (:func:`served_version`, :class:`NotServed`), create, get, delete;
- ``_pods``: :class:`Pods`, the waits on pods, the env check and exec;
- ``_teardown``: :class:`Sweeper`, the namespace sweep after a subtest;
- ``_builder``: :class:`Builder`, an object factory that owns the other three and forwards
  to them.

Import from here; the module layout behind these names may change.
"""

from e2e_dra.builder._api import NotServed, ObjectClient, object_path, served_version
from e2e_dra.builder._builder import Builder
from e2e_dra.builder._objects import (
    DEFAULT_ENV,
    DEFAULT_PARAMETERS,
    IDLE_COMMAND,
    IMPLICIT_EXTENDED_RESOURCE_PREFIX,
    NON_ROOT_USER,
    RESOURCE_V1,
    SCHEDULING_V1BETA1,
    ObjectFactory,
    is_allocated,
    is_unschedulable,
)
from e2e_dra.builder._pods import POD_DELETE_TIMEOUT, POD_START_TIMEOUT, PodFailed, Pods
from e2e_dra.builder._teardown import DRIVER_POD_LABEL, TEARDOWN_TIMEOUT, Sweeper

__all__ = [
    "DEFAULT_ENV",
    "DEFAULT_PARAMETERS",
    "DRIVER_POD_LABEL",
    "IDLE_COMMAND",
    "IMPLICIT_EXTENDED_RESOURCE_PREFIX",
    "NON_ROOT_USER",
    "POD_DELETE_TIMEOUT",
    "POD_START_TIMEOUT",
    "RESOURCE_V1",
    "SCHEDULING_V1BETA1",
    "TEARDOWN_TIMEOUT",
    "Builder",
    "NotServed",
    "ObjectClient",
    "ObjectFactory",
    "PodFailed",
    "Pods",
    "Sweeper",
    "is_allocated",
    "is_unschedulable",
    "object_path",
    "served_version",
]
