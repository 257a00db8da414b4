"""HTTP for release files: one client configuration, one idea of "try again", one time budget.

dl.k8s.io redirects to a CDN, and CDNs and mirrors drop connections and answer 5xx now and then;
those are worth a few more tries. A 404, a 403, a URL that cannot be parsed, a scheme we do not
speak, a redirect loop are not: they fail at once, as one line naming the URL. Every try counts
against one :class:`Budget` (an overall deadline and a minimum speed), so a mirror that trickles
ends the run with a reason instead of holding it for hours.

Small files (markers, checksums) are read raw and decoded by us: a mirror that labels a plain body
``Content-Encoding: gzip`` (a misconfiguration seen in the wild) still gives its text.
"""

from __future__ import annotations

import gzip
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

import httpx
import tenacity

from e2e_dra import __version__
from e2e_dra.errors import InputError, NotFoundError, ReleaseError
from e2e_dra.settings import Settings, parsed, rate, release_tree_url, seconds, settings

T = TypeVar("T")

TRANSIENT_STATUS = frozenset({408, 429, 500, 502, 503, 504})
ATTEMPTS = 6
SMALL_FILE_LIMIT = 1 << 20  # markers and checksums are a few bytes; more is not one of them

DEADLINE_ENV = "E2E_DRA_DOWNLOAD_DEADLINE"
MIN_SPEED_ENV = "E2E_DRA_DOWNLOAD_MIN_SPEED"
DEFAULT_DEADLINE = Settings.download_deadline  # seconds for one release
DEFAULT_MIN_SPEED = Settings.download_min_speed  # bytes/s, averaged over SPEED_WINDOW
SPEED_WINDOW = 30.0  # seconds


class TransientStatus(Exception):
    """A status that says "later", raised so that the retry loop sees it."""

    def __init__(self, url: str, response: httpx.Response) -> None:
        super().__init__(f"{url}: HTTP {response.status_code} {response.reason_phrase}")
        self.url = url
        self.status_code = response.status_code
        self.reason = response.reason_phrase


def parse_seconds(text: str, what: str) -> float:
    """``90`` or ``90s`` or ``15m`` -> seconds; ``0`` means no limit."""
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
            deadline=parse_seconds(deadline, "deadline") if deadline else given.download_deadline,
            min_speed=(
                parse_rate(min_speed, "minimum speed") if min_speed else given.download_min_speed
            ),
        )

    def remaining(self) -> float:
        if not self.deadline:
            return float("inf")
        return self.deadline - (time.monotonic() - self.started)

    def check(self, url: str) -> None:
        if self.remaining() <= 0:
            raise DeadlineExceeded(
                f"getting {url} did not finish within the {self.deadline:.0f}s deadline; run again "
                f"to continue (what arrived is kept), use a faster mirror (KUBERNETES_RELEASE_URL) "
                f"or raise {DEADLINE_ENV} / --deadline"
            )

    def timeout(self) -> httpx.Timeout:
        """Per-request timeouts that never outlive the deadline."""
        read = max(0.5, min(30.0, self.remaining(), self.window if self.min_speed else 30.0))
        return httpx.Timeout(read, connect=min(10.0, read))


class DeadlineExceeded(ReleaseError):
    """The fetch's overall deadline passed: not retried."""


class TooSlow(ReleaseError):
    """A transfer stayed below the minimum speed for a whole window: not retried."""


def new_client(transport: httpx.BaseTransport | None = None) -> httpx.Client:
    return httpx.Client(
        transport=transport,
        follow_redirects=True,
        timeout=httpx.Timeout(30.0, connect=10.0),
        headers={"User-Agent": f"e2e-dra/{__version__}"},
    )


def check_base_url(url: str, what: str) -> str:
    """A release tree URL we can use: http(s), a host, parseable; else one line naming it."""
    return parsed(release_tree_url, url, what)


def _retryable(exc: BaseException) -> bool:
    if isinstance(exc, TransientStatus):
        return True
    permanent = (httpx.UnsupportedProtocol, httpx.LocalProtocolError, httpx.ProxyError)
    return isinstance(exc, httpx.TransportError) and not isinstance(exc, permanent)


def with_retries(what: str, operation: Callable[[], T], budget: Budget | None = None) -> T:
    """Run ``operation``, again after transport errors and transient statuses, with backoff.

    Errors that another try cannot fix fail at once; no try starts after the budget's deadline.
    """
    budget = budget or Budget(deadline=0)

    def stop(state: tenacity.RetryCallState) -> bool:
        return state.attempt_number >= ATTEMPTS or budget.remaining() <= 0

    retrying = tenacity.Retrying(
        retry=tenacity.retry_if_exception(_retryable),
        stop=stop,
        wait=tenacity.wait_exponential(multiplier=0.25, max=8.0),
        reraise=True,
    )
    try:
        return retrying(operation)
    except TransientStatus as exc:
        budget.check(exc.url)
        raise ReleaseError(
            f"getting {exc.url} failed after {ATTEMPTS} attempts: {exc}; the mirror is failing, "
            "try again later or use another one (KUBERNETES_RELEASE_URL)"
        ) from None
    except httpx.TooManyRedirects:
        raise ReleaseError(
            f"getting {what} failed: the server redirects in a loop; check the release URL"
        ) from None
    except httpx.InvalidURL as exc:
        raise InputError(f"{what} is not a usable URL ({exc}); check the release URL") from None
    except (httpx.UnsupportedProtocol, httpx.LocalProtocolError, httpx.ProxyError) as exc:
        raise ReleaseError(f"getting {what} failed: {exc}; check the release URL") from None
    except httpx.TransportError as exc:
        budget.check(what)
        raise ReleaseError(
            f"getting {what} failed after {ATTEMPTS} attempts: {type(exc).__name__}: "
            f"{exc or 'no details'}; check the network or the mirror (KUBERNETES_RELEASE_URL)"
        ) from None
    except httpx.DecodingError as exc:
        raise ReleaseError(f"getting {what} failed: the body cannot be decoded ({exc})") from None


def get_small(client: httpx.Client, url: str, budget: Budget | None = None) -> httpx.Response:
    """GET a small file (marker, checksum) with retries; the caller judges the final status."""

    def attempt() -> httpx.Response:
        if budget is not None:
            budget.check(url)
        timeout = budget.timeout() if budget is not None else httpx.USE_CLIENT_DEFAULT
        with client.stream("GET", url, timeout=timeout) as response:
            raw = bytearray()
            for chunk in response.iter_raw():
                raw += chunk
                if len(raw) > SMALL_FILE_LIMIT:
                    raise ReleaseError(f"{url} is over {SMALL_FILE_LIMIT} bytes: not a marker")
        if response.status_code in TRANSIENT_STATUS:
            raise TransientStatus(url, response)
        headers = [
            (k, v)
            for k, v in response.headers.multi_items()
            if k.lower() not in {"content-encoding", "content-length", "transfer-encoding"}
        ]
        body = _decode(response.headers.get("Content-Encoding", ""), bytes(raw))
        return httpx.Response(
            response.status_code, headers=headers, content=body, request=response.request
        )

    return with_retries(url, attempt, budget)


def _decode(encoding: str, raw: bytes) -> bytes:
    """The body as its encoding says, or as it is when the label does not fit the bytes."""
    encoding = encoding.strip().lower()
    try:
        if encoding in {"gzip", "x-gzip"}:
            return gzip.decompress(raw)
        if encoding == "deflate":
            return zlib.decompress(raw)
    except (OSError, EOFError, zlib.error):
        pass  # labelled compressed, sent plain
    return raw


def status_error(url: str, response: httpx.Response) -> ReleaseError:
    message = f"getting {url} failed: HTTP {response.status_code} {response.reason_phrase}"
    if response.status_code == 404:
        return NotFoundError(message.rstrip() + " (not found)")
    return ReleaseError(message.rstrip())
