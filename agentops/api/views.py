"""The JSON API: session or `Authorization: Bearer <token>`. Identity never comes from the body."""

from __future__ import annotations

import json
import math
import uuid
from typing import Any

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.http import Http404, HttpRequest, JsonResponse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from accounts.http import AuthedRequest, api_auth, api_error, form_body_refused
from accounts.selectors import user_roles
from agentops import selectors
from agentops.api.openapi import MAX_IDEMPOTENCY_KEY, openapi_document
from agentops.api.presenters import run_as_json
from agentops.contract import exports
from agentops.contract.limits import json_problem
from agentops.services import (
    LimiterUnavailableError,
    RunKeyReused,
    RunRateLimited,
    RunRequestError,
    run_start,
    tool_call_governed,
)


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):  # 1e999
        raise ValueError("number out of range")
    return value


def _json_body(request: HttpRequest) -> tuple[Any, JsonResponse | None]:
    """The body as JSON, refused before anything stores it: a form (415), over the size cap (413), not JSON,
    NaN/Infinity, bad UTF-8, nested past the depth cap, a string past the length cap, or what
    jsonb could not hold (400)."""
    if (refused := form_body_refused(request)) is not None:
        return None, refused
    cap = settings.API_MAX_BODY_BYTES
    try:
        declared = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        declared = 0
    too_large = api_error(413, "too_large", f"The request body is over {cap} bytes.")
    if declared > cap:
        return None, too_large
    try:
        raw = request.body
    except RequestDataTooBig:
        return None, too_large
    if len(raw) > cap:
        return None, too_large
    try:
        body = json.loads(raw or b"{}", parse_constant=_no_constant, parse_float=_finite)
    except RecursionError:  # deeper than the parser goes: not JSON we can read
        return None, api_error(400, "malformed_json", _PROBLEMS["too_deep"])
    except ValueError:  # bad JSON, NaN/Infinity, 1e999, bad UTF-8
        return None, api_error(400, "malformed_json", "The request body is not valid JSON.")
    problem = json_problem(
        body, max_depth=settings.API_MAX_JSON_DEPTH, max_string=settings.API_MAX_STRING_CHARS
    )
    if problem is not None:
        return None, api_error(
            400, problem if problem != "not_storable" else "malformed_json", _PROBLEMS[problem]
        )
    return body, None


_PROBLEMS = {
    "too_deep": "The request body is nested too deeply.",
    "string_too_long": "A string in the request body is too long.",
    "not_storable": "The request body holds NUL characters or lone surrogates.",
}


@require_GET
def openapi(request: HttpRequest) -> JsonResponse:
    """The OpenAPI 3.1 document of this API (public: what a call may be, not who may call)."""
    return JsonResponse(openapi_document())


def _idempotency_key(request: HttpRequest) -> tuple[str | None, JsonResponse | None]:
    key = request.headers.get("Idempotency-Key") or None
    if key is not None and not (len(key) <= MAX_IDEMPOTENCY_KEY and key.isprintable()):
        return None, api_error(
            400,
            "bad_idempotency_key",
            f"Idempotency-Key must be 1-{MAX_IDEMPOTENCY_KEY} printable characters.",
        )
    return key, None


@require_GET
@api_auth
def tools_list(request: AuthedRequest) -> JsonResponse:
    roles = user_roles(user=request.user)
    return JsonResponse({"tools": [exports.describe(s) for s in selectors.tools_visible_to(roles)]})


@require_POST
@api_auth
def tool_call(request: AuthedRequest, name: str) -> JsonResponse:
    if selectors.tool_get(name) is None:
        return api_error(404, "unknown_tool", f"There is no tool {name!r}.")
    body, bad = _json_body(request)
    if bad:
        return bad
    key, bad = _idempotency_key(request)
    if bad:
        return bad
    envelope = tool_call_governed(user=request.user, name=name, arguments=body, idempotency_key=key)
    status = _REFUSAL_STATUS.get(
        envelope.get("code") or "", 202 if envelope.get("pending") else 200
    )
    response = JsonResponse(envelope, status=status)
    if status in _REFUSAL_STATUS.values() and envelope.get("retry_after_ms"):
        response["Retry-After"] = str(math.ceil(envelope["retry_after_ms"] / 1000))
    return response


# Refusals of the gate that say "not now" answer as HTTP does, with Retry-After beside the
# envelope's retry_after_ms; every other envelope is the call's answer (200).
_REFUSAL_STATUS = {
    "rate_limited": 429,
    "rate_limiter_unavailable": 503,
    "circuit_open": 503,  # the tool failed repeatedly just now (runtime.circuit)
    # A HIGH call past its requester's bound of approval requests (gate.check_approvals_bound):
    # the hour's with Retry-After, the waiting ones' without (it depends on the approvers).
    "too_many_approvals_this_hour": 429,
    "too_many_pending_approvals": 429,
}


@require_http_methods(["POST"])
@api_auth
def runs_create(request: AuthedRequest) -> JsonResponse:
    body, bad = _json_body(request)
    if bad:
        return bad
    if (
        not isinstance(body, dict)
        or not isinstance(body.get("request"), str)
        or set(body) - {"request", "scope", "conversation_id"}
    ):
        return api_error(
            400,
            "invalid_body",
            'Send {"request": "<text>"} (optionally "scope" and "conversation_id").',
        )
    conversation_id, bad = _conversation_id(body)
    if bad:
        return bad
    key, bad = _idempotency_key(request)
    if bad:
        return bad
    try:
        run = run_start(
            user=request.user,
            request_text=body["request"],
            scope=body.get("scope"),
            idempotency_key=key,
            conversation_id=conversation_id,
        )
    except RunKeyReused:
        return api_error(
            422,
            "idempotency_key_reuse",
            "This Idempotency-Key already started a run for another request.",
        )
    except RunRateLimited as exc:
        response = api_error(429, "rate_limited", exc.reply)
        response["Retry-After"] = str(exc.retry_after_s)
        response["Content-Language"] = exc.language
        return response
    except LimiterUnavailableError:
        response = api_error(503, "unavailable", "The rate limiter did not answer; try again soon.")
        response["Retry-After"] = "1"
        return response
    except RunRequestError as exc:  # only the caller's input: a fault is not a 400
        return api_error(400, "invalid_request", str(exc)[:300])
    return JsonResponse(
        {
            "run_id": str(run.pk),
            "status": run.status,
            "conversation_id": str(run.conversation_id) if run.conversation_id else None,
        },
        status=200 if run.replayed else 202,
    )


def _conversation_id(body: dict[str, Any]) -> tuple[uuid.UUID | None, JsonResponse | None]:
    """The conversation a run continues (``conversation_id`` of an earlier run's answer), or
    None to start one; a value that is not a UUID is a 400."""
    given = body.get("conversation_id")
    if given is None:
        return None, None
    try:
        if not isinstance(given, str) or len(given) > 36:
            raise ValueError(given)
        return uuid.UUID(given), None
    except ValueError:
        return None, api_error(400, "invalid_conversation_id", "conversation_id must be a UUID.")


@require_GET
@api_auth
def runs_detail(request: AuthedRequest, run_id: uuid.UUID) -> JsonResponse:
    run = selectors.run_detail_for_user(run_id=run_id, user=request.user)
    if run is None:
        raise Http404
    return JsonResponse(run_as_json(run))
