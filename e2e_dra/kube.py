"""A small raw-dict client for the Kubernetes API, on top of the ``kubernetes`` package.

The suite talks to two API server versions in one run and uses DRA objects at several API
versions (v1, v1beta2, v1beta1, v1alpha3); typed models would pin us to the client's idea of each
shape. Plain dicts at explicit paths say exactly what goes over the wire, and the ``kubernetes``
package still does what it is good at: kubeconfig loading, TLS, auth, and exec streams.
"""

from __future__ import annotations

import http.client
import json
import os
import threading
import urllib.parse
from collections.abc import Callable, Generator, Mapping
from pathlib import Path
from typing import Any, TypeVar

import tenacity

from e2e_dra.errors import E2EDRAError

T = TypeVar("T")

_PATCH_TYPES = {
    "merge": "application/merge-patch+json",
    "strategic": "application/strategic-merge-patch+json",
    "json": "application/json-patch+json",
    "apply": "application/apply-patch+yaml",
}


class KubeError(E2EDRAError):
    """An API request that the server answered with an error status (or never answered)."""

    def __init__(self, status: int, reason: str, message: str, *, method: str = "", path: str = ""):
        self.status = status
        self.reason = reason
        self.message = message
        self.method = method
        self.path = path
        super().__init__(f"{method} {path}: {status} {reason}: {message}".strip())


class NotFound(KubeError):
    pass


class Conflict(KubeError):
    pass


def path(
    api_version: str,
    plural: str,
    name: str | None = None,
    *,
    namespace: str | None = None,
    subresource: str | None = None,
) -> str:
    """The REST path of a collection or object: ``path("v1", "pods", "p", namespace="ns")``."""
    base = f"/api/{api_version}" if "/" not in api_version else f"/apis/{api_version}"
    parts = [base]
    if namespace:
        parts.append(f"namespaces/{namespace}")
    parts.append(plural)
    if name:
        parts.append(name)
    if subresource:
        parts.append(subresource)
    return "/".join(parts)


FIELD_MANAGER_MAX = 128
"""The longest field manager name the API server keeps (``FieldManagerMaxLength``)."""


def default_field_manager(user_agent: str) -> str:
    """The field manager the API server files a write under when the request names none: its
    user agent up to the first ``/``, printable characters only, at most 128 bytes (the API
    server's ``prefixFromUserAgent``)."""
    manager = ""
    for char in user_agent.split("/", 1)[0]:
        if not char.isprintable():
            continue
        if len((manager + char).encode()) > FIELD_MANAGER_MAX:
            break
        manager += char
    return manager


class _Server:
    """What every client of one API server shares: how often its owner said it restarted, and
    the field managers their writes were filed under."""

    def __init__(self) -> None:
        self.restarts = 0
        self.field_managers: set[str] = set()
        self.lock = threading.Lock()


class Kube:
    """One identity talking to one API server.

    The clients made from one another (:meth:`fresh`, :meth:`impersonating`) know the same
    server. Whoever restarts it says so once (:meth:`server_restarted`); every one of them then
    forgets what it learned about the old server (the API versions it served) before its next
    request, as client-go's discovery does, so nobody has to be handed a new client.
    """

    def __init__(
        self,
        configuration: Any,
        *,
        user_agent: str = "e2e-dra",
        headers: Mapping[str, str] | None = None,
        server: _Server | None = None,
    ):
        from kubernetes import client  # heavy (0.5 s): kept out of e2e-dra --help

        self._configuration = configuration
        self._user_agent = user_agent
        self._headers = dict(headers or {})
        self.api_client = client.ApiClient(configuration)
        self.api_client.user_agent = user_agent
        for key, value in self._headers.items():
            self.api_client.set_default_header(key, value)
        self._server = server or _Server()
        self._known_restarts = self._server.restarts
        self._note_field_manager(default_field_manager(user_agent))
        self._served: dict[str, frozenset[str] | None] = {}
        self._lock = threading.RLock()  # served_resources asks the server while holding it

    @classmethod
    def from_kubeconfig(
        cls, kubeconfig: Path | str, *, user_agent: str = "e2e-dra", pool_size: int | None = None
    ) -> Kube:
        """A client of the cluster ``kubeconfig`` names. ``pool_size``: how many connections
        to the server each client made from it keeps for reuse (the library's default is five
        per CPU); more requests than that at once still go out, but each one over it opens a new
        connection and, done, is thrown away with a "Connection pool is full" warning. Size it
        for the threads that share one client."""
        from kubernetes import client, config

        configuration = client.Configuration()
        config.load_kube_config(
            config_file=os.fspath(kubeconfig),
            client_configuration=configuration,
            persist_config=False,
        )
        if pool_size is not None:
            configuration.connection_pool_maxsize = pool_size
        return cls(configuration, user_agent=user_agent)

    def impersonating(
        self, user: str, *, group: str | None = None, extra: Mapping[str, str] | None = None
    ) -> Kube:
        """The same server, acting as someone else (RBAC and admission see that identity).

        One value per header: the client library sends headers as a dict. That is enough for us:
        for a service account user the server adds the service-account groups itself when no
        group is named, and the node-name extra has a single value.
        """
        headers = {"Impersonate-User": user}
        if group:
            headers["Impersonate-Group"] = group
        for key, value in (extra or {}).items():
            headers[f"Impersonate-Extra-{urllib.parse.quote(key, safe='')}"] = value
        return Kube(
            self._configuration, user_agent=self._user_agent, headers=headers, server=self._server
        )

    def fresh(self) -> Kube:
        """Same identity and server, connections and discovery of its own (a thread that
        long-polls, or one phase's work, keeps to its own)."""
        return Kube(
            self._configuration,
            user_agent=self._user_agent,
            headers=self._headers,
            server=self._server,
        )

    def server_restarted(self) -> None:
        """The API server (or the node behind it) restarted, maybe as another release: every
        client of it forgets what it learned before its next request."""
        self._server.restarts += 1

    @property
    def restarts(self) -> int:
        """How often the server restarted, as its owner said: a change means "look again"."""
        return self._server.restarts

    def close(self) -> None:
        self.api_client.close()

    def field_managers(self) -> frozenset[str]:
        """The field managers the writes of this server's clients were filed under so far: each
        client's default (from its user agent) and every ``fieldManager`` a write named. What
        they wrote, the suite asked for; the quiescence net tells its writes so from the
        cluster's own."""
        with self._server.lock:
            return frozenset(self._server.field_managers)

    def _note_field_manager(self, manager: str) -> None:
        if manager:
            with self._server.lock:
                self._server.field_managers.add(manager)

    # --- requests -----------------------------------------------------------------------------

    def request(
        self,
        method: str,
        url_path: str,
        *,
        body: Any = None,
        query: Mapping[str, Any] | None = None,
        content_type: str | None = None,
        timeout: float | tuple[float, float] = 60,
        stream: bool = False,
    ) -> Any:
        """One request; the decoded JSON answer, or the raw response when ``stream``."""
        self._forget_a_restarted_server()
        if method != "GET" and query and query.get("fieldManager"):
            self._note_field_manager(str(query["fieldManager"]))  # before the write is seen
        headers = {"Accept": "application/json"}
        if content_type:
            headers["Content-Type"] = content_type
        elif body is not None:
            headers["Content-Type"] = "application/json"
        query_params = [(k, _query_value(v)) for k, v in (query or {}).items() if v is not None]
        serialized = self.api_client.param_serialize(
            method,
            url_path,
            query_params=query_params,
            header_params=headers,
            body=body,
            auth_settings=["BearerToken"],
        )
        try:
            response = self.api_client.call_api(*serialized, _request_timeout=timeout)
        except Exception as exc:  # urllib3 errors: the server did not answer
            raise KubeError(0, type(exc).__name__, str(exc), method=method, path=url_path) from exc
        if not 200 <= response.status < 300:
            raise _error(method, url_path, response.status, response.reason, response.read())
        if stream:
            return response.response
        data = response.read()
        return json.loads(data) if data else None

    def get(self, url_path: str, **query: Any) -> dict:
        return self.request("GET", url_path, query=query)

    def list(self, url_path: str, **query: Any) -> list[dict]:
        """The items, each with the ``kind`` and ``apiVersion`` that list items leave out."""
        answer = self.request("GET", url_path, query=query)
        kind = (answer.get("kind") or "").removesuffix("List")
        items = answer.get("items") or []
        for item in items:
            item.setdefault("kind", kind)
            item.setdefault("apiVersion", answer.get("apiVersion"))
        return items

    def create(self, url_path: str, body: dict, **query: Any) -> dict:
        return self.request("POST", url_path, body=body, query=query)

    def update(self, url_path: str, body: dict, **query: Any) -> dict:
        return self.request("PUT", url_path, body=body, query=query)

    def patch(self, url_path: str, body: Any, *, kind: str = "merge", **query: Any) -> dict:
        if kind not in _PATCH_TYPES:
            raise ValueError(f"unknown patch kind {kind!r}; use one of {sorted(_PATCH_TYPES)}")
        return self.request(
            "PATCH", url_path, body=body, query=query, content_type=_PATCH_TYPES[kind]
        )

    def delete(self, url_path: str, *, missing_ok: bool = False, **query: Any) -> dict | None:
        """Delete. An object that is not there is a :class:`NotFound`, as upstream's client says:
        a test that deletes what it created proves that way that the object survived. Clean-up
        code, for which "already gone" is fine, says so with ``missing_ok=True`` (then None)."""
        try:
            return self.request("DELETE", url_path, query=query)
        except NotFound:
            if missing_ok:
                return None
            raise

    def watch(
        self,
        url_path: str,
        *,
        resource_version: str | None = None,
        timeout_seconds: int = 300,
        **query: Any,
    ) -> Generator[dict, None, None]:
        """Watch events (``{"type", "object"}``) until the server ends the watch (or the caller
        closes the generator)."""
        query.update(watch="true", timeoutSeconds=timeout_seconds, allowWatchBookmarks="true")
        if resource_version:
            query["resourceVersion"] = resource_version
        response = self.request(
            "GET", url_path, query=query, stream=True, timeout=(10, timeout_seconds + 30)
        )
        try:
            buffer = b""
            for chunk in response.stream(4096, decode_content=True):
                buffer += chunk
                while b"\n" in buffer:
                    line, buffer = buffer.split(b"\n", 1)
                    if line.strip():
                        yield json.loads(line)
        finally:
            response.release_conn()

    def served(self, group_version: str, resource: str | None = None) -> bool:
        """Whether the server serves ``group/version`` (and ``resource``, a plural, in it), as
        its discovery document says (cached per client)."""
        resources = self.served_resources(group_version)
        return resources is not None and (resource is None or resource in resources)

    def served_resources(self, group_version: str) -> frozenset[str] | None:
        """The resources (plurals, subresources as ``plural/sub``) that the server serves at
        ``group/version``; None when it does not serve that version at all."""
        with self._lock:
            if group_version not in self._served:
                url_path = f"/apis/{group_version}" if "/" in group_version else "/api/v1"
                try:
                    answer = self.request("GET", url_path) or {}
                except NotFound:
                    self._served[group_version] = None
                else:
                    names = (r.get("name", "") for r in answer.get("resources") or [])
                    self._served[group_version] = frozenset(name for name in names if name)
            return self._served[group_version]

    def server_version(self) -> str:
        return self.get("/version")["gitVersion"]

    def _forget_a_restarted_server(self) -> None:
        if self._known_restarts == self._server.restarts:
            return
        with self._lock:
            self._known_restarts = self._server.restarts
            self._served.clear()


def _query_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _error(method: str, url_path: str, status: int, reason: str, data: bytes) -> KubeError:
    message = ""
    try:
        decoded = json.loads(data)
        message = decoded.get("message", "")
        reason = decoded.get("reason", reason) or reason
    except (ValueError, AttributeError):
        message = data.decode(errors="replace")[:500] if data else ""
    cls = {404: NotFound, 409: Conflict}.get(status, KubeError)
    return cls(status, reason, message, method=method, path=url_path)


_TRANSIENT_TEXT = (
    "EOF",
    "connection reset",
    "connection refused",
    "broken pipe",
    "http2: server sent GOAWAY",
    "the server is currently unable to handle the request",
    "unable to upgrade connection",  # exec right after a kubelet restart
)


def transient(exc: BaseException) -> bool:
    """Errors that a restarted API server (or kubelet) produces for a while, then stops producing.

    Connection failures, 5xx, 429, and the bogus authorization errors (403/401) that stale
    connections see right after a restart, before the authorizer's caches are warm again. Real
    failures (404, 409, 422, an assertion, a wait that timed out) are not transient; a 403 that
    persists is bounded by the retry window.
    """
    if isinstance(exc, KubeError):
        if exc.status == 0 or exc.status >= 500 or exc.status in (401, 403, 429):
            return True
        return any(text in exc.message for text in _TRANSIENT_TEXT)
    if isinstance(exc, (ConnectionError, EOFError, http.client.HTTPException)):
        return True
    from kubernetes.client.exceptions import ApiException  # heavy, as is urllib3 (its transport)
    from urllib3.exceptions import HTTPError

    if isinstance(exc, HTTPError):
        return True
    if isinstance(exc, ApiException):  # exec streams (websocket handshake) report this way
        status = exc.status or 0
        return status == 0 or status >= 500 or any(t in str(exc) for t in _TRANSIENT_TEXT)
    return type(exc).__module__.startswith("websocket")


def retrying(fn: Callable[..., T], *, timeout: float = 120) -> Callable[..., T]:
    """Wrap ``fn`` so transient API errors are retried for up to ``timeout`` seconds."""
    return tenacity.retry(
        retry=tenacity.retry_if_exception(transient),
        wait=tenacity.wait_exponential(multiplier=0.5, max=5),
        stop=tenacity.stop_after_delay(timeout),
        reraise=True,
    )(fn)
