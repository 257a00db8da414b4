"""extended-resource-explicit: pods ask for ``<driver>/resource-explicit``, an extended resource
that a DeviceClass maps through ``spec.extendedResourceName``."""

from e2e_dra.subtests._extended_resource import extended_resource_subtest

SUBTEST = extended_resource_subtest("explicit")
