"""``metadata.json`` next to the report: what Prow shows of a job run (and testgrid can put in
its column headers) without opening the page: the pair, the seed, the verdict, e2e-dra's commit.

Prow's sidecar merges an ``$ARTIFACTS/metadata.json`` of string values into the job's
``finished.json``; so every value here is a string, every key starts with ``e2e-dra-`` (what
the job's own steps write there is kept: the file is merged into, never replaced, when it holds
a JSON object), and a fact no summary records (the commit of an e2e-dra that is not a git
checkout) is left out rather than guessed.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from e2e_dra.report._headline import Headline

METADATA_FILE = "metadata.json"
PREFIX = "e2e-dra-"
MAX_KEPT = 1024 * 1024
"""Bytes of an existing ``metadata.json`` read to merge into: Prow's own are a few hundred."""
_COMMIT = re.compile(r"\(git ([0-9a-f]{7,40}(?:-dirty)?)\)")


def metadata(headline: Headline) -> dict[str, str]:
    """The report's facts for Prow: ``e2e-dra-verdict``, ``-pair``, ``-seed``, ``-commit``."""
    found = {f"{PREFIX}verdict": headline.verdict, f"{PREFIX}runs": str(headline.runs)}
    if headline.pairs:
        found[f"{PREFIX}pair"] = "; ".join(headline.pairs)
    if headline.seeds:
        found[f"{PREFIX}seed"] = ", ".join(headline.seeds)
    versions = dict(headline.environment).get("e2e-dra", "")
    commits = list(dict.fromkeys(_COMMIT.findall(versions)))
    if commits:
        found[f"{PREFIX}commit"] = ", ".join(commits)
    return found


def merged(path: Path, facts: dict[str, str]) -> str:
    """``path``'s JSON object (when it is one) with ``facts`` put in, as the file's new text;
    our keys of an earlier report are replaced, everyone else's kept."""
    kept: dict[str, Any] = {}
    try:
        with open(path, "rb") as file:
            data = file.read(MAX_KEPT + 1)
        if len(data) <= MAX_KEPT:
            doc = json.loads(data)
            if isinstance(doc, dict):
                kept = {k: v for k, v in doc.items() if not str(k).startswith(PREFIX)}
    except (OSError, ValueError, RecursionError):
        kept = {}  # none, or not ours to understand: replaced by what we know
    return json.dumps(kept | facts, indent=2, sort_keys=True) + "\n"
