"""HTTP for release files: one client configuration and one idea of "try again".

dl.k8s.io redirects to a CDN, and CDNs and mirrors drop connections and answer 5xx now and then;
those are worth a few more tries, a 404 or a 403 is not.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import httpx
import tenacity

from e2e_dra import __version__
from e2e_dra.errors import ReleaseError

T = TypeVar("T")

TRANSIENT_STATUS = frozenset({408, 429, 500, 502, 503, 504})
ATTEMPTS = 6


class TransientStatus(Exception):
    """A status that says "later", raised so that the retry loop sees it."""

    def __init__(self, url: str, response: httpx.Response) -> None:
        super().__init__(f"{url}: HTTP {response.status_code} {response.reason_phrase}")
        self.url = url
        self.status_code = response.status_code
        self.reason = response.reason_phrase


def new_client(transport: httpx.BaseTransport | None = None) -> httpx.Client:
    return httpx.Client(
        transport=transport,
        follow_redirects=True,
        timeout=httpx.Timeout(30.0, connect=10.0),
        headers={"User-Agent": f"e2e-dra/{__version__}"},
    )


def with_retries(what: str, operation: Callable[[], T]) -> T:
    """Run ``operation``, again after transport errors and transient statuses, with backoff."""
    retrying = tenacity.Retrying(
        retry=tenacity.retry_if_exception_type((httpx.TransportError, TransientStatus)),
        stop=tenacity.stop_after_attempt(ATTEMPTS),
        wait=tenacity.wait_exponential(multiplier=0.25, max=8.0),
        reraise=True,
    )
    try:
        return retrying(operation)
    except TransientStatus as exc:
        raise ReleaseError(f"getting {exc.url} failed after {ATTEMPTS} attempts: {exc}") from None
    except httpx.TransportError as exc:
        raise ReleaseError(
            f"getting {what} failed after {ATTEMPTS} attempts: {type(exc).__name__}: {exc}"
        ) from None


def get_small(client: httpx.Client, url: str) -> httpx.Response:
    """GET a small file (marker, checksum) with retries; the caller judges the final status."""

    def attempt() -> httpx.Response:
        response = client.get(url)
        if response.status_code in TRANSIENT_STATUS:
            raise TransientStatus(url, response)
        return response

    return with_retries(url, attempt)


def status_error(url: str, response: httpx.Response) -> ReleaseError:
    return ReleaseError(
        f"getting {url} failed: HTTP {response.status_code} {response.reason_phrase}".rstrip()
    )
