"""The checks on a subtest's pods: they run, stay unschedulable, are gone, see the driver's env.

The env check is the proof that a claim reached the container: the test driver turns the claim's
opaque config into ``user_a=b`` through CDI, so ``env`` in the container must print it. It runs
``env`` through the kubernetes client's stream API (a websocket), imported when an exec runs: it
is heavy, and most commands (``e2e-dra --help``) never exec.

:class:`Pods` is an :class:`~e2e_dra.builder.ObjectClient` with these checks: the builder is
one, so ``b.wait_running(name)`` is this code, under the name upstream's subtests call.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from e2e_dra.builder._api import ObjectClient
from e2e_dra.builder._objects import DEFAULT_ENV, event_time, is_unschedulable
from e2e_dra.builder._views import claim_names, container_views
from e2e_dra.errors import E2EDRAError, ExecError
from e2e_dra.kube import KubeError, NotFound, retrying
from e2e_dra.waits import WaitTimeout, eventually

POD_START_TIMEOUT = 300.0  # upstream's framework.PodStartTimeout
POD_DELETE_TIMEOUT = 300.0
EVENT_REASONS = 10  # the reasons a failure quotes (a pod has few: Scheduled, Started, ...)
EVENT_REASON_CHARS = 64
EVENT_MESSAGE_CHARS = 160


class PodFailed(E2EDRAError):
    """A pod reached a terminal phase while we waited for it to run."""


class Pods(ObjectClient):
    """Waits for and checks pods by name in one namespace."""

    def read_pod(self, name: str) -> dict:
        """The pod ``name`` as the server has it now."""
        return self.get("pods", name)

    def wait_running(self, name: str, timeout: float = POD_START_TIMEOUT) -> dict:
        """Until the pod runs; fails early if it ended instead, or is gone (deleted: evicted by a
        taint, preempted), saying why from the pod's last events (a pod stopped by an eviction
        may end with its container's exit before it is deleted)."""

        def probe() -> dict:
            try:
                pod = self.read_pod(name)
            except NotFound as exc:
                raise PodFailed(
                    f"pod {self.namespace}/{name} is gone while we waited for it to run"
                    f"{self.events_of(name)}"
                ) from exc
            phase = pod.get("status", {}).get("phase")
            if phase in ("Succeeded", "Failed"):
                raise PodFailed(
                    f"pod {self.namespace}/{name} ended with phase {phase}{self.events_of(name)}"
                )
            return pod

        try:
            return eventually(
                probe,
                what=f"pod {self.namespace}/{name} to run",
                timeout=timeout,
                until=lambda pod: pod.get("status", {}).get("phase") == "Running",
            )
        except WaitTimeout as exc:  # the pod as it was, in a line, and why: not the whole object
            waited = str(exc).split("; last value:", 1)[0]
            raise WaitTimeout(f"{waited}: {self._where(name)}{self.events_of(name)}") from None

    def _where(self, name: str) -> str:
        """``"Pending on 127.0.0.1, container ctr waiting (ContainerCreating)"``."""
        try:
            pod = self.read_pod(name)
        except KubeError as exc:
            return f"cannot be read ({exc})"
        status = pod.get("status", {})
        node = pod.get("spec", {}).get("nodeName")
        said = f"{status.get('phase', 'no phase')} {f'on {node}' if node else 'on no node'}"
        for container in status.get("containerStatuses") or []:
            waiting = (container.get("state") or {}).get("waiting")
            if waiting:
                said += f", container {container.get('name')} waiting ({waiting.get('reason')})"
        return said

    def wait_unschedulable(self, name: str, timeout: float = POD_START_TIMEOUT) -> dict:
        """Until the scheduler reports the pod as Unschedulable (and it is still Pending).

        As upstream's WaitForPodNameUnschedulableInNamespace, a pod that runs or ended fails at
        once: it was scheduled, and waiting longer cannot make it unschedulable again. So does a
        pod bound to a node while still Pending (the scheduler placed it; the failure says which
        devices its claims were given, as an eviction may remove the pod a moment later), and a
        pod that is gone.
        """

        def probe() -> dict:
            try:
                pod = self.read_pod(name)
            except NotFound as exc:
                raise PodFailed(f"pod {self.namespace}/{name} is gone: {exc}") from exc
            phase = pod.get("status", {}).get("phase")
            node = pod.get("spec", {}).get("nodeName")
            if phase in ("Running", "Succeeded", "Failed") or node:
                raise PodFailed(
                    f"pod {self.namespace}/{name} should be Pending and unschedulable, "
                    f"but it is {phase}, scheduled to {node}{self._given(pod)}"
                )
            return pod

        return eventually(
            probe,
            what=f"pod {self.namespace}/{name} to be unschedulable",
            timeout=timeout,
            until=is_unschedulable,
        )

    def events_of(self, name: str) -> str:
        """``"; its events: Scheduled: ...; DeviceTaintManagerEviction: ...; Killing: ..."``:
        what happened to pod ``name``, each reason once with its latest message, in the order
        the reasons first came (why a pod vanished: an eviction marks it before its container
        even starts); empty when there are none."""
        selector = f"involvedObject.kind=Pod,involvedObject.name={name}"
        try:
            events = self.list("events", fieldSelector=selector)
        except KubeError:
            return ""
        latest: dict[str, str] = {}
        for event in sorted(events, key=event_time):
            reason = str(event.get("reason") or "?")[:EVENT_REASON_CHARS]
            latest[reason] = str(event.get("message") or "").strip()[:EVENT_MESSAGE_CHARS]
        said = [f"{reason}: {message}" for reason, message in list(latest.items())[:EVENT_REASONS]]
        return f"; its events: {'; '.join(said)}" if said else ""

    def _given(self, pod: dict) -> str:
        """``", given claim c: pool/device"`` for each claim of ``pod`` (what was allocated)."""
        given = []
        for claim_name in dict.fromkeys(claim_names(pod).values()):
            try:
                claim = self.get("resourceclaims", claim_name)
            except KubeError:
                continue
            allocation = (claim.get("status") or {}).get("allocation") or {}
            results = (allocation.get("devices") or {}).get("results") or []
            devices = ", ".join(f"{r.get('pool')}/{r.get('device')}" for r in results)
            given.append(f"claim {claim_name}: {devices or 'nothing allocated'}")
        return f", given {'; '.join(given)}" if given else ""

    def wait_pod_gone(self, name: str, timeout: float = POD_DELETE_TIMEOUT) -> None:
        """Until the pod ``name`` is gone (reading it answers NotFound)."""
        self.wait_gone("pods", name, timeout=timeout)

    def delete_pod_and_wait(self, name: str, timeout: float = POD_DELETE_TIMEOUT) -> None:
        """Delete a pod the subtest expects to exist (NotFound fails), then wait until gone."""
        self.delete("pods", name)
        self.wait_pod_gone(name, timeout)

    def test_pod(
        self, pod: dict, env: Sequence[str] = DEFAULT_ENV, timeout: float = POD_START_TIMEOUT
    ) -> None:
        """The pod runs, every container's environment holds each ``k=v`` line of ``env``, and
        each container sees the requests of its claims it names and no other
        (:func:`~e2e_dra.builder._views.container_views`)."""
        name = pod["metadata"]["name"]
        self.wait_running(name, timeout)
        printed = {
            container["name"]: self.check_container_env(name, container["name"], env)
            for container in pod["spec"]["containers"]
        }
        now = retrying(self.read_pod)(name)
        claims = {
            claim: retrying(self.get)("resourceclaims", claim)
            for claim in set(claim_names(now).values())
        }
        problems = container_views(now, claims, printed)
        if problems:
            raise AssertionError("; ".join(problems))

    def check_container_env(self, pod_name: str, container: str, env: Iterable[str]) -> str:
        """``env`` in the container prints each ``k=v`` line (as a substring, like upstream);
        what it printed."""
        # Right after a kubelet restart, exec answers "pod does not exist" for a pod the API
        # shows as Running until the kubelet has synced it again: retry that, as upstream does.
        stdout, stderr = retrying(self.exec)(pod_name, container, ["env"])
        if stderr:
            raise AssertionError(f"env in {pod_name}/{container} wrote to stderr: {stderr!r}")
        missing = [line for line in env if f"{line}\n" not in stdout]
        if missing:
            raise AssertionError(
                f"container {pod_name}/{container} lacks env {missing}; env output:\n{stdout}"
            )
        return stdout

    def exec(self, pod_name: str, container: str, command: list[str]) -> tuple[str, str]:
        """Run ``command`` in a container; (stdout, stderr).

        An exec the server could not set up is a KubeError (a restarted kubelet explains it); a
        command that ran and failed is an :class:`ExecError` (nothing explains it away).
        """
        from kubernetes import client, stream
        from kubernetes.client.exceptions import ApiException

        where = f"{self.namespace}/{pod_name}/{container}"
        api = client.CoreV1Api(self.kube.api_client)
        try:
            session = stream.stream(
                api.connect_get_namespaced_pod_exec,
                pod_name,
                self.namespace,
                command=command,
                container=container,
                stdin=False,
                stdout=True,
                stderr=True,
                tty=False,
                _preload_content=False,
            )
        except ApiException as exc:
            raise KubeError(exc.status or 0, "ExecFailed", str(exc.reason), path=where) from exc
        try:
            session.run_forever(timeout=60)
            stdout = session.read_stdout(timeout=0)
            stderr = session.read_stderr(timeout=0)
            if session.is_open():
                raise ExecError(f"{where}: {command} did not finish in 60s")
            code = session.returncode
        finally:
            session.close()
        if code != 0:
            raise ExecError(f"{where}: {command} exited with {code}: {stderr}")
        return stdout, stderr
