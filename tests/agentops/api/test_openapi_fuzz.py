"""Schemathesis fuzzes the JSON API from its own OpenAPI 3.1 document (`/api/openapi.json`), in
process through the WSGI app against real PostgreSQL and Redis, five kinds of caller taking
turns: no 5xx, every status, content type and body as the document says, every payload judged
(none held back by a per-person limit: tests/agentops/fuzzing.py counts them). Bounded: 25
examples per operation and mode."""

from __future__ import annotations

import itertools

import pytest
import schemathesis
from django.core.wsgi import get_wsgi_application
from django.test import Client
from hypothesis import HealthCheck, settings

from agentops.runtime import registry
from tests.agentops.fuzzing import fuzz_limits, fuzz_principals, tally_for

pytestmark = [pytest.mark.integration]

EXAMPLES = 25


# Loaded at collection from the app itself (the document needs no database).
schema = schemathesis.openapi.from_wsgi("/api/openapi.json", get_wsgi_application())
schema.config.generation.update(
    modes=[schemathesis.GenerationMode.POSITIVE, schemathesis.GenerationMode.NEGATIVE],
    max_examples=EXAMPLES,
)


@pytest.fixture
def principals(transactional_db, rooms, e17, e23, settings) -> dict[str, str]:
    """The callers the fuzzer takes turns with, the per-person limits out of their way (they
    are tested on their own): every payload is judged (tests/agentops/fuzzing.py)."""
    fuzz_limits(settings)
    return fuzz_principals(e17=e17, e23=e23)


@pytest.fixture
def token(principals) -> str:
    return principals["e17"]


@pytest.fixture
def fuzzed(request, principals):
    """Each of this operation's payloads, sent as the next principal in turn; then every one
    reached validation and none was answered 5xx."""
    operation = request.node.name.split("[", 1)[-1].rstrip("]")  # "POST /api/tools/get_booking"
    tally = tally_for(f"schemathesis: {operation}")
    turns = itertools.cycle(sorted(principals.items()))
    yield tally, turns
    tally.check(minimum=1, principals=min(tally.payloads, len(principals)))


@schema.parametrize()
@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=list(HealthCheck),
    derandomize=True,
)
def test_the_api_holds_to_its_document_under_fuzzing(case, fuzzed):
    tally, turns = fuzzed
    principal, token = next(turns)
    headers = {"Authorization": f"Bearer {token}"}
    response = case.call(headers=headers)
    if response.status_code == 401 and _probes_authentication(case):
        tally.probes += 1  # the fuzzer took the credentials away on purpose
    else:
        tally.record(response.status_code, _json(response), principal)
    case.validate_response(
        response,
        headers=headers,
        # Both checks assume that the schema alone decides acceptance. Here a call that breaks
        # a tool's schema is answered 200 with a red envelope (the contract the model sees, as
        # the document says), and a schema-valid run request can still be refused with a 400
        # (a scope that would widen the delegation, a request the assistant cannot read).
        excluded_checks=[
            schemathesis.checks.negative_data_rejection,
            schemathesis.checks.positive_data_acceptance,
        ],
    )


def _probes_authentication(case) -> bool:
    """The case tests the API's Authorization header (schemathesis' coverage phase: missing,
    or of another shape): refused before any payload is looked at, by design."""
    data = getattr(getattr(case.meta, "phase", None), "data", None)
    return getattr(data, "parameter", None) == "Authorization"


def _json(response) -> object:
    try:
        return response.json()
    except ValueError:
        return None


# --- the document itself --------------------------------------------------------------------------


@pytest.mark.django_db
def test_the_document_is_built_from_the_registry():
    document = Client().get("/api/openapi.json").json()

    assert document["openapi"] == "3.1.0"
    tools = {
        p.removeprefix("/api/tools/") for p in document["paths"] if p.startswith("/api/tools/")
    }
    assert tools == {s.name for s in registry.all_tools()}
    for spec in registry.all_tools():
        operation = document["paths"][f"/api/tools/{spec.name}"]["post"]
        ref = operation["requestBody"]["content"]["application/json"]["schema"]["$ref"]
        declared = document["components"]["schemas"][ref.rsplit("/", 1)[1]]
        fields = spec.input_model.model_fields  # on the wire by alias ("from", not from_)
        assert declared["properties"].keys() == {f.alias or n for n, f in fields.items()}
        assert declared["additionalProperties"] is False
        headers = [p["name"] for p in operation["parameters"]]
        assert headers == ([] if spec.meta.readonly else ["Idempotency-Key"])
    assert {"/api/runs", "/api/runs/{run_id}", "/api/tools"} <= set(document["paths"])
    assert "$defs" not in str(document)  # hoisted to components, refs resolvable


@pytest.mark.parametrize("path", [f"/api/tools/{s.name}" for s in registry.all_tools()])
def test_a_rate_limited_call_is_a_documented_429_with_retry_after(path, token, settings):
    settings.AGENT_RATE_LIMIT_PER_MINUTE = 0
    case = schema[path]["POST"].Case(body={}, media_type="application/json")
    response = case.call_and_validate(headers={"Authorization": f"Bearer {token}"})

    assert response.status_code == 429
    body = response.json()
    assert (body["code"], body["signal"]) == ("rate_limited", "yellow")
    assert 0 < body["retry_after_ms"] <= 60_000
    headers = {k.lower(): v for k, v in response.headers.items()}
    assert int(headers["retry-after"][0]) == -(-body["retry_after_ms"] // 1000)
    documented = schema.raw_schema["paths"][path]["post"]["responses"]["429"]
    assert "Retry-After" in documented["headers"]
