"""Schemathesis fuzzes the JSON API from its own OpenAPI 3.1 document (`/api/openapi.json`), in
process through the WSGI app against real PostgreSQL and Redis: no 5xx, every status, content
type and body as the document says. Bounded: 25 examples per operation and mode."""

from __future__ import annotations

import pytest
import schemathesis
from django.core.wsgi import get_wsgi_application
from django.test import Client
from hypothesis import HealthCheck, settings

from accounts.services import token_issue
from agentops.runtime import registry
from agentops.runtime.redis_client import get_redis

pytestmark = [pytest.mark.integration]

EXAMPLES = 25


# Loaded at collection from the app itself (the document needs no database).
schema = schemathesis.openapi.from_wsgi("/api/openapi.json", get_wsgi_application())
schema.config.generation.update(
    modes=[schemathesis.GenerationMode.POSITIVE, schemathesis.GenerationMode.NEGATIVE],
    max_examples=EXAMPLES,
)


@pytest.fixture
def token(transactional_db, rooms, e17, settings) -> str:
    # The fuzzer is one user calling fast: the per-user limits stay out of its way here
    # (they are tested on their own in test_ratelimit.py).
    settings.AGENT_RATE_LIMIT_PER_MINUTE = 100_000
    settings.AGENT_RUN_RATE_LIMIT_PER_MINUTE = 100_000
    get_redis().flushdb()
    return token_issue(user=e17)


@schema.parametrize()
@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=list(HealthCheck),
    derandomize=True,
)
def test_the_api_holds_to_its_document_under_fuzzing(case, token):
    case.call_and_validate(
        headers={"Authorization": f"Bearer {token}"},
        # Both checks assume that the schema alone decides acceptance. Here a call that breaks
        # a tool's schema is answered 200 with a red envelope (the contract the model sees, as
        # the document says), and a schema-valid run request can still be refused with a 400
        # (a scope that would widen the delegation, a request the assistant cannot read).
        excluded_checks=[
            schemathesis.checks.negative_data_rejection,
            schemathesis.checks.positive_data_acceptance,
        ],
    )


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
