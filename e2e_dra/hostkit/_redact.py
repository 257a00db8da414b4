"""Credentials out of every URL we show: the one rule for secrets in messages.

A mirror or proxy URL may carry a password or a token: ``https://user:pass@mirror/release``, a
signed ``?token=...`` query, ``https://TOKEN@host`` (token as the user name). Error lines end up in
CI logs, bug reports and test summaries that other people read, so every message that may show a
URL passes through :func:`redact` first: the user info becomes ``***@`` and every query value
``***``, while the scheme, host, path and query keys stay, which is what a reader needs to tell
which server and which file failed. It works on whole messages (it finds the URLs in them), so it
can be applied where a line is printed as well as where it is made, and applying it twice changes
nothing more.
"""

from __future__ import annotations

import re

MASK = "***"

# scheme://[userinfo@]host... up to whitespace or a quote. The user info runs to the LAST "@" before
# the path (a password may hold "@"), and never past "/", "?" or "#".
_URL = re.compile(
    r"""(?P<scheme>\b[A-Za-z][A-Za-z0-9+.\-]*://)"""
    r"""(?:(?P<userinfo>[^\s/?#'"<>]*)@)?"""
    r"""(?P<rest>[^\s?#'"<>]*)"""
    r"""(?:\?(?P<query>[^\s#'"<>]*))?"""
)


def redact(text: str) -> str:
    """``text`` with the user info and query values of every URL in it masked."""
    if "://" not in text:
        return text
    return _URL.sub(_masked, text)


def _masked(match: re.Match[str]) -> str:
    shown = match["scheme"]
    if match["userinfo"] is not None:
        shown += f"{MASK}@"
    shown += match["rest"]
    query = match["query"]
    if query is not None:
        shown += "?" + "&".join(_masked_parameter(p) for p in query.split("&"))
    return shown


def _masked_parameter(parameter: str) -> str:
    key, sep, _value = parameter.partition("=")
    if not sep:  # a bare value (``?s3cr3t``) is as secret as a named one
        return MASK if parameter else parameter
    return f"{key}={MASK}"
