"""The CDI specs the driver writes satisfy the official CDI JSON schema (tests/data/cdi-schema)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import jsonschema
import pytest
import referencing
import referencing.jsonschema

from e2e_dra.driver._node_service import ClaimRef, NodeService

SCHEMA_DIR = Path(__file__).parent / "data" / "cdi-schema"
DRIVER = "default-core-dra.k8s.io"
# From the CDI spec: vendor is a domain-like name, class and device names are restricted too.
QUALIFIED_NAME = re.compile(
    r"^[a-zA-Z0-9]([a-zA-Z0-9._-]*[a-zA-Z0-9])?/[a-zA-Z0-9]([a-zA-Z0-9_-]*[a-zA-Z0-9])?="
    r"[a-zA-Z0-9][a-zA-Z0-9_.:-]*$"
)


def load(name: str) -> dict:
    """Our copies start with one line naming their origin; the rest is the file as published."""
    text = (SCHEMA_DIR / name).read_text()
    assert text.startswith("// From github.com/cncf-tags/container-device-interface")
    return json.loads(text.split("\n", 1)[1])


@pytest.fixture(scope="module")
def validator():
    defs = referencing.Resource.from_contents(
        load("defs.json"), default_specification=referencing.jsonschema.DRAFT7
    )
    registry = referencing.Registry().with_resource("defs.json", defs)
    schema = load("schema.json")
    jsonschema.Draft7Validator.check_schema(schema)
    return jsonschema.Draft7Validator(schema, registry=registry)


def prepared_specs(tmp_path: Path, configs: list[dict]) -> list[Path]:
    claim = {
        "metadata": {"name": "external-claim", "namespace": "default", "uid": "0b5f-uid"},
        "status": {
            "allocation": {
                "devices": {
                    "results": [
                        {"request": "gpu/large", "driver": DRIVER, "pool": "n", "device": "d0"},
                        {"request": "nic", "driver": DRIVER, "pool": "n", "device": "d1"},
                    ],
                    "config": configs,
                }
            }
        },
    }
    service = NodeService(DRIVER, tmp_path, lambda namespace, name: claim)
    (result,) = service.prepare([ClaimRef("default", "external-claim", "0b5f-uid")]).values()
    assert result.error == ""
    return sorted(tmp_path.glob("*.json"))


def test_written_specs_validate(tmp_path, validator):
    configs = [
        {"source": "FromClass", "opaque": {"driver": DRIVER, "parameters": {"mode": "x=y"}}},
        {"source": "FromClaim", "opaque": {"driver": DRIVER, "parameters": {"a": "b"}}},
    ]

    specs = prepared_specs(tmp_path, configs)

    assert [p.name for p in specs] == [f"{DRIVER}-0b5f-uid-gpu.json", f"{DRIVER}-0b5f-uid-nic.json"]
    for path in specs:
        spec = json.loads(path.read_text())
        validator.validate(spec)
        device = spec["devices"][0]
        assert QUALIFIED_NAME.match(f"{spec['kind']}={device['name']}")
        env = device["containerEdits"]["env"]
        assert env == sorted(env) and all(re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", e) for e in env)
        assert oct(path.stat().st_mode & 0o777) == oct(0o644)
    assert (
        "admin_mode=x=y" in json.loads(specs[0].read_text())["devices"][0]["containerEdits"]["env"]
    )


def test_the_schema_rejects_what_runtimes_reject(validator):
    # guards the test itself: a spec without container edits must not pass
    with pytest.raises(jsonschema.ValidationError):
        validator.validate(
            {"cdiVersion": "0.3.0", "kind": f"{DRIVER}/test", "devices": [{"name": "x"}]}
        )
