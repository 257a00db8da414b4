"""The subtests' harnesses and the safety nets of one suite, across its clusters.

They outlive each cluster (a gate cycle has one per subtest; a finding of one subtest waits for
its next phase, wherever that runs), so they belong to no :class:`LiveCluster`: a cluster step
has them look before and after it (:meth:`SuiteNets.before`, :meth:`SuiteNets.after`), and a
cleanup has them take their last look and stop the drivers (:meth:`SuiteNets.cleanup`) before
the cluster itself stops.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from e2e_dra._suite._artifacts import dump_cluster
from e2e_dra._suite._disruption import DisruptionNet
from e2e_dra._suite._findings import Findings
from e2e_dra._suite._harnesses import Harnesses
from e2e_dra._suite._live_cluster import LiveCluster, Starting
from e2e_dra._suite._liveness import ComponentNet
from e2e_dra._suite._nets import Finding
from e2e_dra._suite._readback import ReadBackNet
from e2e_dra.builder import SUITE_LABEL
from e2e_dra.hostkit import Attempt, Teardown
from e2e_dra.kube import Kube

NAMESPACE = "default"

logger = logging.getLogger(__name__)


class SuiteNets:
    """One suite's harnesses (``harnesses``) and safety nets: the disruption and read-back nets
    around each cluster step, the claim, slice and driver nets (routed by ``findings``), and the
    components' (``components``)."""

    def __init__(self, subtests: Mapping[str, Any], artifacts: Path, suite: str) -> None:
        self.harnesses = Harnesses(subtests, artifacts / "drivers", NAMESPACE, suite)
        self.disruption = DisruptionNet({SUITE_LABEL: suite})
        self.read_back = ReadBackNet()
        self.findings = Findings(
            lambda: [
                *self.harnesses.take_slice_findings(),
                *self.disruption.take(),
                *self.read_back.take(),
            ]
        )
        self.components = ComponentNet()

    def before(self, api: Kube, step: str) -> None:
        """As ``step`` starts on a cluster that is up: the running subtests' pods recorded, the
        DRA objects listed."""
        self.disruption.before(api, step, self.harnesses.running())
        self.read_back.before(api, step)

    def after(self, api: Kube) -> None:
        """As the step ends: the pods and the objects compared with what was recorded."""
        self.disruption.after(api)
        self.read_back.after(api)

    def cleanup(
        self,
        teardown: Teardown,
        live: LiveCluster | None,
        starting: Starting | None,
        *,
        meanwhile: Attempt,
        slice_removal: bool,
        dumps: Path,
    ) -> Iterator[Attempt]:
        """A cleanup's attempts up to the cluster's own stop, in order: what the subtests left
        dumped (into ``dumps``) and looked at once more, the node's logs copied, each subtest's
        objects torn down and its drivers stopped, then ``meanwhile`` (what runs while the
        kubelet wipes the stopped drivers' ResourceSlices), the nets' last look (the slices
        gone, unless ``slice_removal`` is False; the claims) and what they still hold."""
        reachable = live is not None and live.reachable()
        if live is not None and reachable:  # what the subtests left, as the server saw it last
            dump = functools.partial(dump_cluster, live.api, dumps, "final", NAMESPACE)
            yield Attempt("dump the DRA objects", dump, look=True)
            # the phases after the last step ran: their pods still as they were
            second_look = functools.partial(self.disruption.second_look, live.api)
            yield Attempt("the disruption net's second look", second_look, look=True)
            self.findings.hold(self.disruption.take())
        logs = live.node_logs if live is not None else starting.node_logs if starting else None
        if logs is not None:  # before the teardown deletes the pods and their logs
            yield Attempt("copy the node's logs", logs.end, look=True)
        closed: list[tuple[dict[str, str], list[Finding]]] = []
        kube = live.api if live is not None else None
        yield Attempt(
            "close the subtests' harnesses",
            lambda: closed.append(self.harnesses.close(teardown, kube, tear_down=reachable)),
        )
        stopped, slice_findings = closed[0] if closed else ({}, [])
        self.findings.hold(slice_findings)
        yield meanwhile
        if live is not None and reachable:
            if not slice_removal:
                logger.info("ResourceSlice removal: checked in this suite's first cluster")
            gone = stopped if slice_removal else {}
            last_look = functools.partial(self.findings.last_look, teardown, live.api, gone)
            yield Attempt("the safety nets' last look", last_look, look=True)
        yield Attempt("what the safety nets still hold", lambda: self._still_waiting(teardown))

    def _still_waiting(self, teardown: Teardown) -> None:
        """What no later test took fails the cleanup, as a failure found rather than raised."""
        waiting = self.findings.still_waiting()
        if waiting is not None:
            teardown.fail(waiting, "what the safety nets still hold")
