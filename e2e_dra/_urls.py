"""URLs e2e-dra requests or writes into its pages, checked before any use: one grammar and one
wording of the error for a setting and the command-line flag that takes the same value."""

from __future__ import annotations

import re
from urllib.parse import urlsplit


def undecodable(text: str) -> bool:
    """Whether ``text`` came from bytes that are not UTF-8 (Python keeps them as surrogates)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


# Characters no URL holds unencoded (RFC 3986): httpx would quietly encode a space in the host and
# the request would fail only after every retry, seconds later, as a name that does not resolve.
_NOT_IN_URLS = re.compile(r'[\s\x00-\x1f\x7f<>"{}|\\^`]')
_HOST_NAME = re.compile(r"[\w.-]+")  # \w: letters of any script too (IDN hosts)


def _http_url(text: str, kind: str, example: str) -> str:
    """An http(s) URL we can request: a host, nothing that needs encoding, no fragment.

    A query is kept and sent with every file (a mirror may want a token on each request); a
    fragment is refused, because it is never sent to a server, so it cannot mean what its writer
    meant.
    """
    if undecodable(text):
        raise ValueError(
            "holds bytes that are not UTF-8, which no URL can carry; give it as text, "
            "percent-encoding any other byte (%FF)"
        )
    if found := _NOT_IN_URLS.search(text):
        raise ValueError(
            f"is not a usable URL: it holds {found[0]!r}, which must be percent-encoded "
            "(a space as %20)"
        )
    try:
        parts = urlsplit(text)
        parts.port  # noqa: B018 - raises ValueError on a bad port
        host = parts.hostname or ""
        bad = parts.scheme not in {"http", "https"} or not host
        bad = bad or ("[" not in parts.netloc and not _HOST_NAME.fullmatch(host))
    except ValueError:
        bad = True
    if bad:
        raise ValueError(f"is not an http(s) URL of a {kind} (e.g. {example})")
    if "#" in text:
        raise ValueError("has a #fragment, which is never sent to a server; remove it")
    return text


def release_tree_url(text: str) -> str:
    """A release tree URL we can use (see :func:`_http_url`)."""
    return _http_url(text, "release tree", "https://dl.k8s.io/release")


def module_proxy_url(text: str) -> str:
    """A Go module proxy URL we can use (see :func:`_http_url`)."""
    return _http_url(text, "Go module proxy", "https://proxy.golang.org")


REPORT_LINK_BASE_EXAMPLE = "https://gcsweb.k8s.io/gcs/<bucket>/logs/<job>/<build>/artifacts"
MAX_LINK_BASE = 2048
"""Characters of a report's link base: a folder's URL is a few hundred; the page repeats it in
every link (thousands), so a longer one would multiply the page's size."""


def report_link_base(text: str) -> str:
    """The URL a report's folder is served at, which each of its links then starts with (see
    :func:`_http_url`): no query either, since the path of an artifact follows the base, at most
    :data:`MAX_LINK_BASE` characters, and without a trailing ``/`` (each link adds one)."""
    if len(text) > MAX_LINK_BASE:
        raise ValueError(
            f"is {len(text)} characters long, more than {MAX_LINK_BASE}; give the URL the "
            f"report's folder is served at (e.g. {REPORT_LINK_BASE_EXAMPLE})"
        )
    _http_url(text, "report's folder", REPORT_LINK_BASE_EXAMPLE)
    if "?" in text:
        raise ValueError(
            "has a ?query, which would end up in the middle of every link; give the folder's "
            f"URL alone (e.g. {REPORT_LINK_BASE_EXAMPLE})"
        )
    return text.rstrip("/")
