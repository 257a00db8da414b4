"""The real drivers' chain (its rules: ``_chain``), one subtest per driver of ``E2E_DRA_DRIVERS``.

A package of one concern a module: the chain itself (``_chain``), what a phase leaves the next
(``_held``), the driver moving with the kubelet (``_lifecycle``), a pod with a claim the driver
prepared (``_pods``) and its unprepare (``_unprepare``), the driver's pools and what they must
show (``_pools``), a change of its devices while claims are prepared (``_device_change``), its
outage (``_downtime``), its rolling update (``_rolling``), and what the kubelet does and logs
(``_kubelet``).
"""

from e2e_dra.subtests.drivers._chain import driver_subtests

__all__ = ["driver_subtests"]
