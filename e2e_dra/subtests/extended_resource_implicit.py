"""extended-resource-implicit: pods ask for ``deviceclass.resource.kubernetes.io/<class>``,
the extended resource every DeviceClass has without configuration."""

from e2e_dra.subtests._extended_resource import extended_resource_subtest

SUBTEST = extended_resource_subtest("implicit")
