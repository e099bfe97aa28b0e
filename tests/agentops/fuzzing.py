"""What the product's own fuzz reached (test_tool_fuzz.py, test_openapi_fuzz.py): per tool or
route, how many payloads were sent, by how many principals, and how many reached validation.

A payload reached validation when the answer is the product's judgement of it (the gate's
schema check and after, or the API's own checks of the body and headers), not a refusal that
comes before looking at it: 401/403 (who is calling), 429 (a per-person limit). A 5xx is a
failure whatever it answers. The fuzz runs with several principals and the per-person limits
lifted (``fuzz_limits``), so that every payload is judged; the counts are printed at the end
of the session (tests/agentops/conftest.py) and each fuzz asserts its own."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from accounts.services import token_issue
from agentops.runtime.redis_client import get_redis
from tests.accounts.factories import ADMINS, APPROVERS, EMPLOYEES, user_create

BEFORE_VALIDATION = frozenset({401, 403, 429})
# The gate's refusals of a payload's shape: one answered otherwise went past the schema.
SCHEMA_CODES = frozenset({"schema_violation", "arguments_not_object", "approval_field_refused"})


@dataclass
class Tally:
    name: str
    payloads: int = 0
    reached: int = 0
    past_schema: int = 0  # answered by the tool's rules, its handler, or the policy
    probes: int = 0  # cases sent without credentials on purpose (answered 401, not payloads)
    principals: set[str] = field(default_factory=set)
    answers: Counter[str] = field(default_factory=Counter)

    def record(self, status: int, body: Any, principal: str) -> None:
        """One payload's answer: ``status`` and its JSON body (the envelope, or the API's
        error), sent as ``principal``."""
        self.payloads += 1
        self.principals.add(principal)
        code = ""
        if isinstance(body, dict):
            code = body.get("code") or (body.get("error") or {}).get("code") or ""
        self.answers[f"{status} {code}".strip()] += 1
        if status < 500 and status not in BEFORE_VALIDATION:
            self.reached += 1
            if status in (200, 202) and code not in SCHEMA_CODES:
                self.past_schema += 1

    @property
    def server_errors(self) -> int:
        return sum(n for answer, n in self.answers.items() if answer.startswith("5"))

    def check(self, *, minimum: int, principals: int) -> None:
        """Every payload reached validation, none was answered 5xx, at least ``minimum`` were
        sent, by at least ``principals`` principals."""
        assert self.server_errors == 0, (self.name, self.answers)
        assert self.reached == self.payloads, (self.name, self.answers)
        assert self.payloads >= minimum, (self.name, self.payloads)
        assert len(self.principals) >= principals, (self.name, self.principals)

    def line(self) -> str:
        return (
            f"{self.name}: {self.reached} of {self.payloads} payloads reached validation "
            f"({self.past_schema} past the schema), {len(self.principals)} principals, "
            f"{self.server_errors} answers of 5xx"
            + (f"; {self.probes} probes without credentials answered 401" if self.probes else "")
        )


REPORT: dict[str, Tally] = {}


def tally_for(name: str) -> Tally:
    """The session's tally of one tool or route (a fuzz may add to it more than once)."""
    return REPORT.setdefault(name, Tally(name))


def fuzz_principals(*, e17: Any, e23: Any) -> dict[str, str]:
    """Bearer tokens of the principals the fuzz takes turns with, each a kind of caller: an
    employee of each department (the fixtures' e17 and e23), an approver, an admin, and
    someone in no group (who sees no tool: refused after the schema, by visibility)."""
    people = {
        "e17": e17,
        "e23": e23,
        "approver": user_create("fz-a01", roles=[EMPLOYEES, APPROVERS]),
        "admin": user_create("fz-admin", roles=[EMPLOYEES, ADMINS], is_superuser=True),
        "no group": user_create("fz-none", roles=[]),
    }
    return {name: token_issue(user=user) for name, user in people.items()}


def fuzz_limits(settings: Any) -> None:
    """The per-person limits out of the fuzz's way (each is tested on its own: the tool-call
    and run-start limits in test_ratelimit.py and test_api_limits.py, approval requests in
    tests/approvals/test_bounds.py): a fuzz is a few callers sending hundreds of payloads a
    minute, and a payload refused for its sender's pace tells nothing about the product."""
    settings.AGENT_RATE_LIMIT_PER_MINUTE = 100_000
    settings.AGENT_RUN_RATE_LIMIT_PER_MINUTE = 100_000
    settings.APPROVAL_PENDING_PER_REQUESTER = 100_000
    settings.APPROVAL_REQUESTS_PER_HOUR = 100_000
    get_redis().flushdb()  # the counters of earlier tests
