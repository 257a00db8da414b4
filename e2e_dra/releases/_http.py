"""HTTP for release files: one client configuration, one idea of "try again", one time budget.

dl.k8s.io redirects to a CDN, and CDNs and mirrors drop connections and answer 5xx now and then;
those are worth a few more tries. A 404, a 403, a URL that cannot be parsed, a scheme we do not
speak, a redirect loop are not: they fail at once, as one line naming the URL. Every try counts
against one :class:`Budget` (an overall deadline and a minimum speed), so a mirror that trickles
ends the run with a reason instead of holding it for hours.

Small files (markers, checksums, a module proxy's answers) are read raw and decoded by us: a mirror
that labels a plain body ``Content-Encoding: gzip`` (a misconfiguration seen in the wild) still
gives its text. They are bounded before and after decompression, so neither a huge body nor a
small one that inflates to gigabytes is held in memory.

**Every request has a wall-clock deadline**, and every socket operation in it (resolving the host,
connecting, the TLS handshake, sending, each read of the status line, the headers and the body) is
given only what is left of it (:func:`deadline`, enforced by the network backend every client of
:func:`new_client` uses). httpx's own timeouts are per operation: a server that sends one byte a
second never trips them, in the headers or the body. The deadline of a request is the fetch's
:class:`Budget` (``--deadline``), and at most :data:`SMALL_FILE_WAIT` for a small file and
:data:`HEADERS_WAIT` until a large file's headers have arrived; the body of a large file is bounded
by the budget and its minimum speed.

Text is UTF-8 by every spec that defines it, whatever charset a server claims (a codec it names
could crash the decoding). Markers and checksums are decoded strictly by :func:`text_of`: a body in
UTF-16 or another encoding is one error line naming the URL. (A module proxy's listing is read
leniently, line by line, by its caller.)

Every message that shows a URL shows it through :func:`e2e_dra.hostkit.redact`: a password or a
token in ``KUBERNETES_RELEASE_URL`` or ``GOPROXY`` is never printed.

A server that says when to come back (``Retry-After`` on a 429 or 503) is asked again then, within
reason (:data:`MAX_RETRY_AFTER`, and never past the deadline), not after our own short backoff.

The same client serves two kinds of server, set by different settings: release trees
(``KUBERNETES_RELEASE_URL`` / ``--base-url``) and Go module proxies (``GOPROXY`` / ``--proxy``).
Every message that tells the user what to check names the one in use (``setting``).
"""

from __future__ import annotations

import codecs
import contextlib
import contextvars
import email.utils
import ipaddress
import math
import re
import socket
import threading
import time
import zlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import PurePosixPath
from typing import Any, TypeVar
from urllib.parse import urlsplit, urlunsplit

import httpcore
import httpx
import tenacity

from e2e_dra import __version__
from e2e_dra._urls import release_tree_url
from e2e_dra.errors import InputError, NotFoundError, ReleaseError
from e2e_dra.hostkit import redact
from e2e_dra.settings import Settings, parsed, rate, seconds, settings

T = TypeVar("T")

# "Later": timeouts, too early, too many requests, and the 5xx a busy or restarting server sends.
# Every other 4xx is the request's fault and fails at once.
TRANSIENT_STATUS = frozenset({408, 425, 429, 500, 502, 503, 504})
ATTEMPTS = 6
SMALL_FILE_LIMIT = 1 << 20  # markers, checksums, go.mod files are kilobytes; more is not one
MAX_RETRY_AFTER = 60.0  # seconds: a server asking for more is asked again after this long
RELEASE_URL_SETTING = "the release URL (KUBERNETES_RELEASE_URL or --base-url)"
GOPROXY_SETTING = "the Go module proxy (GOPROXY or --proxy)"

DEADLINE_ENV = "E2E_DRA_DOWNLOAD_DEADLINE"
MIN_SPEED_ENV = "E2E_DRA_DOWNLOAD_MIN_SPEED"
DEFAULT_DEADLINE = Settings.download_deadline  # seconds for one release
DEFAULT_MIN_SPEED = Settings.download_min_speed  # bytes/s, averaged over SPEED_WINDOW
SPEED_WINDOW = 30.0  # seconds
SMALL_FILE_WAIT = 60.0  # seconds one request for a small file may take, whatever the budget
HEADERS_WAIT = 60.0  # seconds until a large file's status and headers must have arrived


class TransientStatus(Exception):
    """A status that says "later", raised so that the retry loop sees it."""

    def __init__(self, url: str, response: httpx.Response) -> None:
        super().__init__(redact(f"{url}: HTTP {response.status_code} {response.reason_phrase}"))
        self.url = url
        self.status_code = response.status_code
        self.reason = response.reason_phrase
        self.retry_after = retry_after_seconds(response.headers.get("Retry-After"))


def retry_after_seconds(value: str | None, now: datetime | None = None) -> float | None:
    """The wait a ``Retry-After`` header asks for (seconds, or an HTTP date), at most
    :data:`MAX_RETRY_AFTER`; None when there is none or it cannot be read."""
    text = (value or "").strip()
    if re.fullmatch(r"[0-9]+", text):
        wait = float(text)  # float: no digit limit, a huge value is simply large
    else:
        try:
            when = email.utils.parsedate_to_datetime(text)
        except (TypeError, ValueError, IndexError):
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        wait = (when - (now or datetime.now(UTC))).total_seconds()
    return max(0.0, min(wait, MAX_RETRY_AFTER))


def url_under(base: str, *segments: str) -> str:
    """``base`` with ``segments`` appended to its path, its query kept.

    Plain string concatenation would put the segments into the query of a base such as
    ``https://mirror/release?token=...`` (and the server would answer 404 for the base itself);
    a query on a release tree's URL is meant for every file in it, so each request carries it.
    """
    parts = urlsplit(base)
    path = "/".join([parts.path.rstrip("/"), *segments])
    return urlunsplit(parts._replace(path=path))


def file_name(url: str) -> str:
    """The last path segment of ``url``: the name of the file it serves."""
    return PurePosixPath(urlsplit(url).path).name


def parse_seconds(text: str, what: str) -> float:
    """``90``, ``90s``, ``1m30s`` -> seconds (:func:`e2e_dra.settings.seconds`)."""
    return parsed(seconds, text, what)


def parse_rate(text: str, what: str) -> float:
    """``50000`` or ``50k`` or ``1M`` (bytes per second) -> bytes per second; ``0`` means none."""
    return parsed(rate, text, what)


@dataclass
class Budget:
    """How long a fetch may take in all, and how slow a transfer may get, before we give up.

    ``deadline`` is seconds from creation (0: none); ``min_speed`` is bytes/s averaged over the last
    ``window`` seconds of a transfer (0: none). Settable with E2E_DRA_DOWNLOAD_DEADLINE /
    E2E_DRA_DOWNLOAD_MIN_SPEED and ``--deadline`` / ``--min-speed``.
    """

    deadline: float = DEFAULT_DEADLINE
    min_speed: float = DEFAULT_MIN_SPEED
    window: float = SPEED_WINDOW
    started: float = field(default_factory=time.monotonic)

    @classmethod
    def from_env(cls, deadline: str | None = None, min_speed: str | None = None) -> Budget:
        """Flags win over the environment (:mod:`e2e_dra.settings`), which wins over the
        defaults."""
        given = settings()
        return cls(
            deadline=(
                parse_seconds(deadline, "--deadline")
                if deadline is not None
                else given.download_deadline
            ),
            min_speed=(
                parse_rate(min_speed, "--min-speed")
                if min_speed is not None
                else given.download_min_speed
            ),
        )

    def remaining(self) -> float:
        if not self.deadline:
            return float("inf")
        return self.deadline - (time.monotonic() - self.started)

    def check(self, url: str) -> None:
        if self.remaining() <= 0:
            raise DeadlineExceeded(
                redact(
                    f"getting {url} did not finish within the {self.deadline:g}s deadline; run "
                    f"again to continue (what arrived is kept), use a faster mirror "
                    f"(KUBERNETES_RELEASE_URL) or raise {DEADLINE_ENV} / --deadline"
                )
            )

    def timeout(self) -> httpx.Timeout:
        """Per-request timeouts that never outlive the deadline."""
        read = max(0.5, min(30.0, self.remaining(), self.window if self.min_speed else 30.0))
        return httpx.Timeout(read, connect=min(10.0, read))


class DeadlineExceeded(ReleaseError):
    """The fetch's overall deadline passed: not retried."""


class TooSlow(ReleaseError):
    """A transfer stayed below the minimum speed for a whole window: not retried."""


# -- the wall-clock deadline of a request ---------------------------------------------------------

EXPIRED = "no whole answer within the request's deadline (the server sends too slowly)"
"""The message of the timeout raised when a request's deadline passes: it is not retried (a server
that took this long for one request is not expected to be quicker the next time)."""
_DEADLINE: contextvars.ContextVar[float | None] = contextvars.ContextVar(
    "e2e_dra_request_deadline", default=None
)


@contextlib.contextmanager
def deadline(seconds: float) -> Iterator[None]:
    """Every socket operation of this thread's requests inside the block must end within
    ``seconds`` from now (``inf``: no deadline); an enclosing, earlier deadline still holds."""
    at = None if math.isinf(seconds) else time.monotonic() + max(0.0, seconds)
    outer = _DEADLINE.get()
    if outer is not None and (at is None or outer < at):
        at = outer
    token = _DEADLINE.set(at)
    try:
        yield
    finally:
        _DEADLINE.reset(token)


def _time_left(timeout: float | None, expired: type[Exception]) -> float | None:
    """``timeout`` cut to what is left of the current deadline; ``expired`` once it has passed."""
    at = _DEADLINE.get()
    if at is None:
        return timeout
    left = at - time.monotonic()
    if left <= 0:
        raise expired(EXPIRED)
    return left if timeout is None else min(timeout, left)


@contextlib.contextmanager
def _expiry(expired: type[Exception]) -> Iterator[None]:
    """A socket timeout that ran into the deadline is the deadline's (:data:`EXPIRED`), not a
    plain timeout that another try might not meet."""
    try:
        yield
    except httpcore.TimeoutException:
        at = _DEADLINE.get()
        if at is not None and time.monotonic() >= at - 0.01:
            raise expired(EXPIRED) from None
        raise


class _DeadlineStream(httpcore.NetworkStream):
    """A connection whose every read, write and handshake ends by the current deadline."""

    def __init__(self, inner: httpcore.NetworkStream) -> None:
        self._inner = inner

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        with _expiry(httpcore.ReadTimeout):
            return self._inner.read(max_bytes, _time_left(timeout, httpcore.ReadTimeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        with _expiry(httpcore.WriteTimeout):
            self._inner.write(buffer, _time_left(timeout, httpcore.WriteTimeout))

    def close(self) -> None:
        self._inner.close()

    def start_tls(
        self,
        ssl_context: Any,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> httpcore.NetworkStream:
        left = _time_left(timeout, httpcore.ConnectTimeout)
        with _expiry(httpcore.ConnectTimeout):
            return _DeadlineStream(self._inner.start_tls(ssl_context, server_hostname, left))

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


class _DeadlineBackend(httpcore.NetworkBackend):
    """httpcore's network backend with the deadline applied to name resolution, connecting and
    every operation on the connection (see the module's docstring)."""

    def __init__(self, inner: httpcore.NetworkBackend) -> None:
        self._inner = inner

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.NetworkStream:
        failure: Exception | None = None
        for address in _resolve(host, port, _time_left(timeout, httpcore.ConnectTimeout)):
            left = _time_left(timeout, httpcore.ConnectTimeout)
            try:
                with _expiry(httpcore.ConnectTimeout):
                    stream = self._inner.connect_tcp(
                        address, port, left, local_address, socket_options
                    )
            except httpcore.ConnectError as exc:  # the next address may answer
                failure = exc
                continue
            return _DeadlineStream(stream)
        raise failure or httpcore.ConnectError(f"{host} has no address")

    def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[Any] | None = None
    ) -> httpcore.NetworkStream:
        left = _time_left(timeout, httpcore.ConnectTimeout)
        return _DeadlineStream(self._inner.connect_unix_socket(path, left, socket_options))

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


def _resolve(host: str, port: int, timeout: float | None) -> list[str]:
    """``host``'s addresses, in the order ``getaddrinfo`` gives them; a resolver that does not
    answer within ``timeout`` (getaddrinfo itself has none) is a connect timeout."""
    with contextlib.suppress(ValueError):
        ipaddress.ip_address(host)
        return [host]
    answer: list[object] = []

    def lookup() -> None:
        try:
            answer.append(socket.getaddrinfo(host, port, type=socket.SOCK_STREAM))
        except OSError as exc:
            answer.append(exc)

    worker = threading.Thread(target=lookup, name=f"resolve {host}", daemon=True)
    worker.start()
    worker.join(timeout)
    if not answer:
        raise httpcore.ConnectTimeout(f"resolving {host} took longer than {timeout:g}s")
    if isinstance(answer[0], OSError):
        raise httpcore.ConnectError(f"cannot resolve {host}: {answer[0]}")
    found = answer[0]
    assert isinstance(found, list)
    return list(dict.fromkeys(str(info[4][0]) for info in found))


MAX_REDIRECTS = 20
"""Redirects one request follows (httpx's default): more is a loop or a chain gone wrong."""


def new_client(transport: httpx.BaseTransport | None = None) -> httpx.Client:
    """The client every request of ours goes through: redirects followed, and the wall-clock
    deadline (:func:`deadline`) applied to every connection it opens, proxies included."""
    client = httpx.Client(
        transport=transport,
        follow_redirects=True,
        max_redirects=MAX_REDIRECTS,
        timeout=httpx.Timeout(30.0, connect=10.0),
        headers={"User-Agent": f"e2e-dra/{__version__}"},
    )
    for mounted in [client._transport, *client._mounts.values()]:
        pool = getattr(mounted, "_pool", None)  # an httpx.HTTPTransport's connection pool
        if pool is not None:
            pool._network_backend = _DeadlineBackend(pool._network_backend)
    return client


def text_of(url: str, response: httpx.Response, setting: str = RELEASE_URL_SETTING) -> str:
    """The body of a small text file as UTF-8 (a BOM dropped), whatever charset the server
    names; anything else is one line naming ``url``."""
    data = response.content
    if data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)) or b"\0" in data:
        why = "it holds NUL bytes: UTF-16 or UTF-32?"
    else:
        try:
            return data.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            why = f"byte {exc.start} is not UTF-8"
    raise ReleaseError(
        redact(
            f"{url} is not UTF-8 text ({why}); the server sends a broken file: fix it (save it as "
            f"UTF-8) or use another server, {setting}"
        )
    )


def check_base_url(url: str, what: str) -> str:
    """A release tree URL we can use: http(s), a host, parseable; else one line naming it."""
    return parsed(release_tree_url, url, what)


def _retryable(exc: BaseException) -> bool:
    if isinstance(exc, TransientStatus):
        return True
    permanent = (httpx.UnsupportedProtocol, httpx.LocalProtocolError, httpx.ProxyError)
    if isinstance(exc, httpx.TimeoutException) and str(exc) == EXPIRED:
        return False  # the request's own deadline (see EXPIRED)
    return isinstance(exc, httpx.TransportError) and not isinstance(exc, permanent)


_BACKOFF = tenacity.wait_exponential(multiplier=0.25, max=8.0)


def _wait(state: tenacity.RetryCallState) -> float:
    """The server's ``Retry-After`` when it gave one, else our exponential backoff."""
    failure = state.outcome.exception() if state.outcome is not None else None
    asked = failure.retry_after if isinstance(failure, TransientStatus) else None
    return _BACKOFF(state) if asked is None else asked


def with_retries(
    what: str,
    operation: Callable[[], T],
    budget: Budget | None = None,
    *,
    setting: str = RELEASE_URL_SETTING,
) -> T:
    """Run ``operation``, again after transport errors and transient statuses, with backoff.

    Errors that another try cannot fix fail at once; no try starts after the budget's deadline,
    and none is waited for that would start after it. ``setting`` is what the user set to point
    us at this server, named in the advice of every failure.
    """
    budget = budget or Budget(deadline=0)

    def stop(state: tenacity.RetryCallState) -> bool:
        if state.attempt_number >= ATTEMPTS or budget.remaining() <= 0:
            return True
        return _wait(state) >= budget.remaining()  # the next try would start past the deadline

    retrying = tenacity.Retrying(
        retry=tenacity.retry_if_exception(_retryable),
        stop=stop,
        wait=_wait,
        reraise=True,
    )

    def attempts() -> str:
        count = retrying.statistics.get("attempt_number", ATTEMPTS)
        return f"{count} attempt{'s' if count != 1 else ''}"

    try:
        return retrying(operation)
    except TransientStatus as exc:
        budget.check(exc.url)
        advice = f"the server is failing, try again later or use another one: {setting}"
        if exc.retry_after is not None and exc.retry_after >= budget.remaining():
            advice = (
                f"it asks to be asked again in {exc.retry_after:.0f}s (Retry-After), after the "
                f"deadline; try again later or raise {DEADLINE_ENV} / --deadline"
            )
        raise ReleaseError(
            redact(f"getting {exc.url} failed after {attempts()}: {exc}; {advice}")
        ) from None
    except httpx.TooManyRedirects as exc:
        last = str(exc.request.url)  # a loop leads back where it started; a long chain does not
        how = (
            "redirects in a loop"
            if last == what
            else f"redirects more than {MAX_REDIRECTS} times (the last to {last})"
        )
        raise ReleaseError(
            redact(f"getting {what} failed: the server {how}; check {setting}")
        ) from None
    except httpx.InvalidURL as exc:
        if _usable(what):  # ours is fine: the server redirected to one that is not
            raise ReleaseError(
                redact(
                    f"getting {what} failed: the server redirects to a URL that is not usable "
                    f"({exc}); check {setting}"
                )
            ) from None
        raise InputError(redact(f"{what} is not a usable URL ({exc}); check {setting}")) from None
    except (httpx.UnsupportedProtocol, httpx.LocalProtocolError, httpx.ProxyError) as exc:
        raise ReleaseError(redact(f"getting {what} failed: {exc}; check {setting}")) from None
    except httpx.TransportError as exc:
        budget.check(what)
        raise ReleaseError(
            redact(
                f"getting {what} failed after {attempts()}: {type(exc).__name__}: "
                f"{exc or 'no details'}; check the network and {setting}"
            )
        ) from None
    except httpx.DecodingError as exc:
        raise ReleaseError(
            redact(f"getting {what} failed: the body cannot be decoded ({exc}); check {setting}")
        ) from None


def _usable(url: str) -> bool:
    """Whether httpx can send a request to ``url`` as it is."""
    try:
        httpx.URL(url)
    except (httpx.InvalidURL, ValueError, TypeError):
        return False
    return True


def get_small(
    client: httpx.Client,
    url: str,
    budget: Budget | None = None,
    *,
    setting: str = RELEASE_URL_SETTING,
) -> httpx.Response:
    """GET a small file (marker, checksum, module proxy answer) with retries, at most
    :data:`SMALL_FILE_LIMIT` bytes as sent and as decoded, each try within
    :data:`SMALL_FILE_WAIT` seconds and the budget; the caller judges the final status."""
    too_large = ReleaseError(
        redact(
            f"{url} sent more than {SMALL_FILE_LIMIT} bytes, more than any marker, checksum or "
            f"module file holds; check {setting}"
        )
    )

    def attempt() -> httpx.Response:
        if budget is not None:
            budget.check(url)
        timeout = budget.timeout() if budget is not None else httpx.USE_CLIENT_DEFAULT
        left = budget.remaining() if budget is not None else math.inf
        with (
            deadline(min(SMALL_FILE_WAIT, left)),
            client.stream("GET", url, timeout=timeout) as response,
        ):
            raw = bytearray()
            for chunk in response.iter_raw():
                raw += chunk
                if len(raw) > SMALL_FILE_LIMIT:
                    raise too_large
        if response.status_code in TRANSIENT_STATUS:
            raise TransientStatus(url, response)
        headers = [
            (k, v)
            for k, v in response.headers.multi_items()
            if k.lower() not in {"content-encoding", "content-length", "transfer-encoding"}
        ]
        body = _decode(response.headers.get("Content-Encoding", ""), bytes(raw))
        if len(body) > SMALL_FILE_LIMIT:
            raise too_large
        return httpx.Response(
            response.status_code, headers=headers, content=body, request=response.request
        )

    return with_retries(url, attempt, budget, setting=setting)


_WBITS = {"gzip": 16 + zlib.MAX_WBITS, "x-gzip": 16 + zlib.MAX_WBITS, "deflate": zlib.MAX_WBITS}


def _decode(encoding: str, raw: bytes) -> bytes:
    """The body as its encoding says (at most one byte more than :data:`SMALL_FILE_LIMIT`: enough
    to tell it is too large), or as it is when the label does not fit the bytes."""
    wbits = _WBITS.get(encoding.strip().lower())
    if wbits is None:
        return raw
    inflater = zlib.decompressobj(wbits)
    try:
        body = inflater.decompress(raw, SMALL_FILE_LIMIT + 1)
    except zlib.error:
        return raw  # labelled compressed, sent plain
    if len(body) <= SMALL_FILE_LIMIT and not inflater.eof:
        return raw  # not a whole compressed stream: the label is wrong
    return body


def status_error(
    url: str, response: httpx.Response, setting: str = RELEASE_URL_SETTING
) -> ReleaseError:
    message = f"getting {url} failed: HTTP {response.status_code} {response.reason_phrase}".rstrip()
    if response.status_code == 404:
        return NotFoundError(redact(f"{message} (not found); check the version or {setting}"))
    if response.status_code == 206:  # a part nobody asked for: no refusal, a broken server
        return ReleaseError(
            redact(f"{message}, a part of the file that was not asked for; check {setting}")
        )
    return ReleaseError(redact(f"{message}; check {setting} (it refuses this file)"))
