"""The authorization matrix: every URL and websocket route, for every kind of caller, one
expected status per cell, in one table.

Routes are enumerated from the URL resolver (rows in ROWS) and from the ASGI application's
routers (websockets in WS_ROWS; an HTTP app mounted beside Django, such as MCP at /mcp, in
ASGI_HTTP_ROWS, requested through the whole ASGI stack): a route without a row fails
`test_every_route_has_a_row`, so a new screen lands with its row. A row is one request
(method, path, body) and the status each principal gets; a row that changes something also says
who may change it (the state is compared before and after each cell, which runs in its own
savepoint). Session principals send a valid CSRF token; `test_csrf_is_required_on_every_
session_post` sends none.

Principals (columns, in this order):
  anon       no credentials              e17 / e17b   employee, session / bearer token
  e23 / e23b another employee            a01 / a01b   approver (and employee)
  adm / admb admin (superuser, staff)    revoked      e17's bearer token, revoked
  deact / deactb  a deactivated employee, session / bearer token
"""

from __future__ import annotations

import asyncio
import contextlib
import json as _json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from asgiref.testing import ApplicationCommunicator
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator
from django.contrib.auth import get_user_model
from django.db import transaction
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver
from django.utils import timezone

from accounts.models import ApiToken
from accounts.services import token_issue
from agentops.models import Action, AgentRun, DrillRun
from agentops.runtime.direct import tool_call_governed
from agentops.runtime.redis_client import get_redis
from approvals.models import ApprovalRequest
from bookings.models import Booking, Room
from bookings.services import booking_reserve
from tests.conftest import ENG, slot

pytestmark = [pytest.mark.integration]

PRINCIPALS = ("anon", "e17", "e17b", "e23", "e23b", "a01", "a01b", "adm", "admb", "revoked", "deact", "deactb")  # fmt: skip
SESSION = {"e17", "e23", "a01", "adm", "deact"}
CSRF = "c" * 32  # a valid CSRF secret: cookie and header carry the same one


@dataclass(frozen=True)
class World:
    """The objects the routes act on: all e17's (a booking, a run, an approval request for
    R16, a premium room) plus the raw tokens of the bearer principals."""

    booking: str
    run: str
    action: str
    approval: str
    tokens: dict[str, str]


@dataclass(frozen=True)
class Row:
    route: str  # as the resolver spells it
    method: str
    path: str  # with {booking}, {run}, {approval} for e17's objects
    expect: str  # one status per principal, in PRINCIPALS order
    data: dict[str, Any] | None = None
    json: bool = False
    # What the request may change, and who may change it (everyone else must not).
    state: Callable[[World], Any] | None = None
    may_change: frozenset[str] = field(default_factory=frozenset)

    def statuses(self) -> dict[str, int]:
        codes = self.expect.split()
        assert len(codes) == len(PRINCIPALS), self
        return dict(zip(PRINCIPALS, map(int, codes), strict=True))


def booking_status(w: World) -> str:
    return Booking.objects.get(code=w.booking).status


def approval_status(w: World) -> str:
    return ApprovalRequest.objects.get(pk=w.approval).status


def action_status(w: World) -> str:
    return Action.objects.get(pk=w.action).status


def drills_count(w: World) -> int:
    return DrillRun.objects.count()


def runs_count(w: World) -> int:
    return AgentRun.objects.count()


# Redirects to the login page are 302; a bearer token means nothing to a screen. In the API: 401
# without valid credentials; someone else's objects read as 404 (runs) or booking_not_found.
# Paths name e17's objects: {booking}, {run}, {approval}.
C = booking_status
A = approval_status
R = runs_count
X = action_status
D = drills_count
EMPLOYEES = frozenset(PRINCIPALS) - {"anon", "revoked", "deact", "deactb"}
# fmt: off
ROWS = [
    #   route                        method  path                          anon e17 e17b e23 e23b a01 a01b adm admb rev deact deactb
    Row("",                            "GET",  "/",                           "302 200 302 200 302 200 302 200 302 302 302 302"),
    Row("book/",                       "POST", "/book/",                      "302 400 302 400 302 400 302 400 302 302 302 302", {"room": "R7"}),
    Row("bookings/",                   "GET",  "/bookings/",                  "302 200 302 200 302 200 302 200 302 302 302 302"),
    Row("bookings/<str:code>/cancel/", "POST", "/bookings/{booking}/cancel/", "302 302 302 404 302 404 302 302 302 302 302 302",
        # An admin's cancel of e17's booking waits for another approver: nothing changes yet.
        state=C, may_change=frozenset({"e17"})),
    Row("bookings/<str:code>/change/", "GET", "/bookings/{booking}/change/", "302 200 302 404 302 404 302 200 302 302 302 302"),
    Row("bookings/<str:code>/change/save/", "POST", "/bookings/{booking}/change/save/",
                                                                              "302 400 302 400 302 400 302 400 302 302 302 302",
        state=C),
    Row("day/",                        "GET",  "/day/",                       "302 200 302 200 302 200 302 200 302 302 302 302"),
    Row("day/room/<str:code>/",        "GET",  "/day/room/R7/",               "302 200 302 200 302 200 302 200 302 302 302 302"),
    Row("day/slot/",                   "GET",  "/day/slot/",                  "302 200 302 200 302 200 302 200 302 302 302 302"),
    Row("day/book/",                   "POST", "/day/book/",                  "302 400 302 400 302 400 302 400 302 302 302 302", {"room": "R7"}),
    Row("requests/<uuid:request_id>/withdraw/", "POST", "/requests/{approval}/withdraw/",
                                                                              "302 302 302 302 302 302 302 302 302 302 302 302",
        state=A, may_change=frozenset({"e17"})),
    Row("series/new/",                 "GET",  "/series/new/",                "302 200 302 200 302 200 302 200 302 302 302 302"),
    Row("series/book/",                "POST", "/series/book/",               "302 400 302 400 302 400 302 400 302 302 302 302", {"room": "R7"}),
    Row("series/<int:series_id>/",     "GET",  "/series/999999/",             "302 404 302 404 302 404 302 404 302 302 302 302"),
    Row("series/<int:series_id>/cancel/", "POST", "/series/999999/cancel/",   "302 400 302 400 302 400 302 400 302 302 302 302"),
    Row("calendar/",                   "GET",  "/calendar/",                  "302 200 302 200 302 200 302 200 302 302 302 302"),
    Row("calendar/reset/",             "POST", "/calendar/reset/",            "302 302 302 302 302 302 302 302 302 302 302 302"),
    Row("calendar/feed/<str:token>.ics", "GET", "/calendar/feed/nope.ics",    "404 404 404 404 404 404 404 404 404 404 404 404"),
    Row("bookings/<str:code>/calendar.ics", "GET", "/bookings/{booking}/calendar.ics",
                                                                              "302 200 302 404 302 404 302 200 302 302 302 302"),
    Row("bookings/<str:code>/check-in/", "POST", "/bookings/{booking}/check-in/",
                                                                              "302 400 302 404 302 404 302 404 302 302 302 302", state=C),
    Row("approvals/",                  "GET",  "/approvals/",                 "302 403 302 403 302 200 302 403 302 302 302 302"),
    Row("approvals/<uuid:request_id>/", "GET", "/approvals/{approval}/",     "302 200 302 404 302 200 302 404 302 302 302 302"),
    Row("approvals/<uuid:request_id>/decide/", "POST", "/approvals/{approval}/decide/",
                                                                              "302 302 302 302 302 302 302 302 302 302 302 302",
        {"decision": "reject", "reason": "matrix"}, state=A, may_change=frozenset({"a01"})),
    Row("approvals/<uuid:request_id>/refresh/", "POST", "/approvals/{approval}/refresh/",
                                                                              "302 302 302 302 302 302 302 302 302 302 302 302",
        state=A),
    Row("nav/counts/",                 "GET",  "/nav/counts/",                "302 200 302 200 302 200 302 200 302 302 302 302"),
    Row("operators/queue/",            "GET",  "/operators/queue/",           "302 403 302 403 302 403 302 200 302 302 302 302"),
    Row("operators/queue/<uuid:action_id>/decide/", "POST", "/operators/queue/{action}/decide/",
                                                                              "302 403 302 403 302 403 302 302 302 302 302 302",
        {"decision": "accept_receipt"}, state=X),
    Row("operators/queue/runs/<uuid:run_id>/rollback/", "POST", "/operators/queue/runs/{run}/rollback/",
                                                                              "302 403 302 403 302 403 302 302 302 302 302 302",
        state=X),
    Row("assistant/",                  "GET",  "/assistant/",                 "302 200 302 200 302 200 302 200 302 302 302 302"),
    Row("assistant/runs/",             "POST", "/assistant/runs/",            "302 302 302 302 302 302 302 302 302 302 302 302",
        {"request": "list my bookings", "key": "00000000-0000-4000-8000-000000000001"},
        state=R, may_change=frozenset({"e17", "e23", "a01", "adm"})),
    Row("assistant/runs/<uuid:run_id>/", "GET", "/assistant/runs/{run}/",     "302 200 302 404 302 200 302 200 302 302 302 302"),
    Row("ops/audit/",                  "GET",  "/ops/audit/",                 "302 403 302 403 302 403 302 200 302 302 302 302"),
    Row("ops/audit/export",            "POST", "/ops/audit/export",           "302 403 302 403 302 403 302 200 302 302 302 302"),
    Row("ops/runs/<str:run_id>/",      "GET",  "/ops/runs/{run}/",            "302 200 302 404 302 404 302 200 302 302 302 302"),
    Row("ops/drills/",                 "GET",  "/ops/drills/",                "302 403 302 403 302 403 302 200 302 302 302 302"),
    Row("ops/drills/start",            "POST", "/ops/drills/start",           "302 403 302 403 302 403 302 302 302 302 302 302",
        state=D, may_change=frozenset({"adm"})),
    Row("ops/drills/<str:drill_id>/",  "GET",  "/ops/drills/no-such-drill/",  "302 403 302 403 302 403 302 404 302 302 302 302"),
    Row("api/openapi.json",            "GET",  "/api/openapi.json",           "200 200 200 200 200 200 200 200 200 200 200 200"),
    Row("api/tools",                   "GET",  "/api/tools",                  "401 200 200 200 200 200 200 200 200 401 401 401"),
    Row("api/tools/<str:name>",        "POST", "/api/tools/get_booking",      "401 200 200 200 200 200 200 200 200 401 401 401",
        {}, json=True),
    Row("api/tools/<str:name>",        "POST", "/api/tools/cancel_booking",   "401 200 200 200 200 200 200 200 200 401 401 401",
        {"booking_id": "B0"}, json=True, state=C),
    Row("api/runs",                    "POST", "/api/runs",                   "401 202 202 202 202 202 202 202 202 401 401 401",
        {"request": "list my bookings"}, json=True, state=R, may_change=EMPLOYEES),
    Row("api/runs/<uuid:run_id>",      "GET",  "/api/runs/{run}",             "401 200 200 404 404 404 404 404 404 401 401 401"),
    Row("login/",                      "GET",  "/login/",                     "200 200 200 200 200 200 200 200 200 200 200 200"),
    Row("login/",                      "POST", "/login/",                     "200 200 200 200 200 200 200 200 200 200 200 200",
        {"username": "e17", "password": "wrong"}),
    # RFC 9728 metadata of /mcp: public, the same for everyone.
    Row(".well-known/oauth-protected-resource", "GET", "/.well-known/oauth-protected-resource",
                                                                              "200 200 200 200 200 200 200 200 200 200 200 200"),
    Row(".well-known/oauth-protected-resource/mcp", "GET", "/.well-known/oauth-protected-resource/mcp",
                                                                              "200 200 200 200 200 200 200 200 200 200 200 200"),
    Row("logout/",                     "POST", "/logout/",                    "302 302 302 302 302 302 302 302 302 302 302 302"),
    Row("i18n/setlang/",               "POST", "/i18n/setlang/",              "302 302 302 302 302 302 302 302 302 302 302 302",
        {"language": "zh-hans"}),
    Row("admin/",                      "GET",  "/admin/",                     "302 302 302 302 302 302 302 200 302 302 302 302"),
    Row("admin/bookings/booking/",     "GET",  "/admin/bookings/booking/",    "302 302 302 302 302 302 302 200 302 302 302 302"),
]
# fmt: on

# Routes a row stands for by prefix, with the reason (the admin's hundreds of model URLs all go
# through the same staff check that the two admin rows prove).
COVERED_BY_PREFIX = {"admin/": "Django admin: staff only, one check for every model URL"}

# Websocket routes: (route, path, expected close/accept per principal). 1 = accepted; 4401
# without a user; 4403 not an approver; 4404 a run the caller may not watch, or no such route (e17's run waits for
# an approver: approvers and admins may watch it). Bearer tokens mean nothing to a websocket
# (the page's session authenticates it).
# fmt: off
WS_ROWS = [
    #  route                     path                anon e17 e17b e23  e23b a01  a01b adm  admb rev  deact deactb
    ("ws/runs/<uuid:run_id>/", "/ws/runs/{run}/", "4401 1 4401 4404 4401 1 4401 1 4401 4401 4401 4401"),
    ("ws/approvals/",          "/ws/approvals/",  "4401 4403 4401 4403 4401 1 4401 4403 4401 4401 4401 4401"),
    ("ws/schedule/",           "/ws/schedule/?day=2026-12-02", "4401 1 4401 1 4401 1 4401 1 4401 4401 4401 4401"),
    # The last route: any path no consumer serves is refused at the handshake (config.security).
    ("",                       "/ws/nothing-here/", "4404 4404 4404 4404 4404 4404 4404 4404 4404 4404 4404 4404"),
    ("ws/nav/",                "/ws/nav/",        "4401 4403 4401 4403 4401 1 4401 1 4401 4401 4401 4401"),
    ("ws/bookings/",           "/ws/bookings/",   "4401 1 4401 1 4401 1 4401 1 4401 4401 4401 4401"),
]
# fmt: on

MCP_INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "matrix", "version": "1"},
    },
}
# HTTP through the whole ASGI application (the server's view): an app mounted beside Django
# (MCP at /mcp) gets its rows here, by its ASGI route; "(django)" rows prove that the wrappers
# (header limits, static files) leave Django's authentication as it is.
# fmt: off
ASGI_HTTP_ROWS = [
    #   route       method path          anon e17 e17b e23 e23b a01 a01b adm admb rev deact deactb
    Row("mcp",      "POST", "/mcp",      "401 401 200 401 200 401 200 401 200 401 401 401", MCP_INIT, json=True),
    Row("(django)", "GET", "/api/tools", "401 200 200 200 200 200 200 200 200 401 401 401"),
    Row("(django)", "GET", "/bookings/", "302 200 302 200 302 200 302 200 302 302 302 302"),
    Row("(django)", "POST", "/api/runs", "401 202 202 202 202 202 202 202 202 401 401 401",
        {"request": "list my bookings"}, json=True),
]
# fmt: on


# --- route enumeration ------------------------------------------------------------------------------


def url_routes() -> set[str]:
    def walk(patterns, prefix=""):
        for p in patterns:
            if isinstance(p, URLResolver):
                yield from walk(p.url_patterns, prefix + str(p.pattern))
            elif isinstance(p, URLPattern):
                yield prefix + str(p.pattern)

    return set(walk(get_resolver().url_patterns))


def asgi_routes(protocol: str) -> set[str]:
    """The routes of the ASGI application's URLRouters for one protocol, found by walking down
    its wrappers (websockets today; an HTTP app mounted beside Django, such as MCP, tomorrow).
    Django itself, mounted as a catch-all, is not a route of its own: the resolver lists it."""
    import config.asgi

    django_apps = {id(config.asgi.django_asgi), id(config.asgi.http_app)}
    seen, stack, routes = set(), [config.asgi.application], set()
    while stack:
        app = stack.pop()
        if id(app) in seen or id(app) in django_apps:
            continue
        seen.add(id(app))
        if protocol == "http" and getattr(app, "mount_path", None):
            routes.add(app.mount_path.lstrip("/"))  # an app mounted by path (agentops.mcp)
        if isinstance(app, URLRouter):
            for route in app.routes:
                if id(route.callback) not in django_apps:
                    routes.add(str(route.pattern))
                stack.append(route.callback)
            continue
        for name in ("application", "inner", "app", "application_mapping"):
            child = getattr(app, name, None)
            if isinstance(child, dict):
                stack.extend(v for k, v in child.items() if k == protocol)
            elif child is not None:
                stack.append(child)
    return routes


def test_every_route_has_a_row():
    rows = {r.route for r in ROWS}
    missing = {
        route
        for route in url_routes()
        if route not in rows and not any(route.startswith(p) for p in COVERED_BY_PREFIX)
    }
    assert not missing, f"routes without a row in ROWS: {sorted(missing)}"
    assert asgi_routes("websocket") == {r[0] for r in WS_ROWS}, (
        "websocket routes and WS_ROWS differ"
    )
    unrowed = asgi_routes("http") - {r.route for r in ASGI_HTTP_ROWS}
    assert not unrowed, f"HTTP routes of the ASGI app without a row in ASGI_HTTP_ROWS: {unrowed}"
    assert rows <= url_routes(), f"rows for routes that do not exist: {rows - url_routes()}"


def test_an_app_mounted_beside_django_is_found_and_needs_a_row(monkeypatch):
    """How MCP (or any ASGI app at its own path) will show up: as an HTTP route of the ASGI
    router, which the row check above then requires; Django's catch-all is not listed."""
    from channels.routing import ProtocolTypeRouter
    from django.urls import path, re_path

    import config.asgi

    async def mcp(scope, receive, send):  # pragma: no cover - never called
        raise AssertionError

    mounted = ProtocolTypeRouter(
        {"http": URLRouter([path("mcp", mcp), re_path(r"", config.asgi.http_app)])}
    )
    monkeypatch.setattr(config.asgi, "application", config.security.HeaderLimits(mounted))
    assert asgi_routes("http") == {"mcp"}
    assert asgi_routes("websocket") == set()


# --- the principals and their world ------------------------------------------------------------


def _world(admin_user, approver) -> tuple[World, dict[str, Any]]:
    from tests.accounts.factories import user_create as create

    e17 = create("e17", department=ENG)
    e23 = create("e23", department="Sales")
    deact = create("d01", department=ENG)
    users = {"e17": e17, "e23": e23, "a01": approver, "adm": admin_user, "deact": deact}
    start, end = slot(days=8, hour=10)
    booking = booking_reserve(
        user=e17, room_code="R7", start_at=start, end_at=end, attendees=2, idempotency_key="m"
    ).booking
    premium = {
        "room_id": "R16",
        "start_at": start.isoformat(),
        "end_at": end.isoformat(),
        "attendees": 4,
        "expected_version": Room.objects.get(code="R16").schedule_version,
    }
    pending = tool_call_governed(user=e17, name="reserve_room", arguments=premium)["pending"]
    approval = ApprovalRequest.objects.get().pk
    tokens = {f"{name}b": token_issue(user=user) for name, user in users.items()}
    tokens["revoked"] = token_issue(user=e17)
    ApiToken.objects.filter(prefix=tokens["revoked"][:10]).update(revoked_at=timezone.now())
    clients = {}
    for name, user in users.items():
        client = Client(enforce_csrf_checks=True)
        client.force_login(user)
        clients[name] = client
    get_user_model().objects.filter(pk=deact.pk).update(is_active=False)
    world = World(booking.code, pending["run_id"], pending["action_id"], str(approval), tokens)
    return world, clients


def _request(principal: str, row: Row, world: World, clients: dict[str, Client], csrf: bool):
    client = Client(enforce_csrf_checks=True)  # fresh: a logout in one cell ends no other's
    if principal in SESSION:
        client.cookies["sessionid"] = clients[principal].cookies["sessionid"].value
    headers: dict[str, str] = {}
    if principal in world.tokens:
        headers["HTTP_AUTHORIZATION"] = f"Bearer {world.tokens[principal]}"
    if csrf:
        client.cookies["csrftoken"] = CSRF
        headers["HTTP_X_CSRFTOKEN"] = CSRF
    path = row.path.format(**vars(world))
    if row.method == "GET":
        return client.get(path, **headers)
    if row.json:
        return client.post(path, _json.dumps(row.data), content_type="application/json", **headers)
    return client.post(path, row.data or {}, **headers)


def _cell(principal: str, row: Row, world: World, clients, *, csrf: bool = True):
    """One request in a savepoint that is rolled back: every cell sees the same world."""
    with transaction.atomic():
        before = row.state(world) if row.state else None
        response = _request(principal, row, world, clients, csrf)
        changed = row.state is not None and row.state(world) != before
        transaction.set_rollback(True)
    return response, changed


@pytest.fixture
def matrix_world(rooms, admin_user, approver, settings):
    settings.AGENT_RATE_LIMIT_PER_MINUTE = 100_000
    settings.AGENT_RUN_RATE_LIMIT_PER_MINUTE = 100_000
    get_redis().flushdb()
    return _world(admin_user, approver)


# Committed data: a screen's cancel and change go through the runtime, whose tool threads use
# connections of their own.
@pytest.mark.django_db(transaction=True)
def test_the_authorization_matrix(matrix_world, settings):
    """Every cell of ROWS: the status, and whether the state changed (only for may_change)."""
    # Every principal signs in wrongly as e17 here: the sign-in throttle (its own tests in
    # tests/accounts/test_login_throttle.py) would lock e17 after five of them.
    settings.LOGIN_MAX_FAILURES_PER_ACCOUNT = settings.LOGIN_MAX_FAILURES_PER_ADDRESS = 10_000
    world, clients = matrix_world
    wrong = []
    for row in ROWS:
        expected = row.statuses()
        for principal in PRINCIPALS:
            response, changed = _cell(principal, row, world, clients)
            if response.status_code != expected[principal]:
                wrong.append(
                    f"{row.method} /{row.route} {principal}: "
                    f"{response.status_code}, expected {expected[principal]}"
                )
            if changed != (principal in row.may_change):
                wrong.append(f"{row.method} /{row.route} {principal}: changed={changed}")
    assert not wrong, "\n".join(wrong)


@pytest.mark.django_db
def test_csrf_is_required_on_every_session_post(matrix_world):
    """Every POST a session can make is refused (403) without a CSRF token, whoever sends it,
    and changes nothing (a bearer token needs none: no cookie rides along)."""
    world, clients = matrix_world
    wrong = []
    for row in (r for r in ROWS if r.method == "POST"):
        for principal in ("e17", "a01", "adm"):
            response, changed = _cell(principal, row, world, clients, csrf=False)
            if response.status_code != 403 or changed:
                wrong.append(f"POST /{row.route} {principal}: {response.status_code} {changed}")
    assert not wrong, "\n".join(wrong)


# --- websockets ---------------------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_the_asgi_matrix(rooms, admin_user, approver, settings):
    """Websocket routes and HTTP rows through config.asgi.application, against committed data
    (the ASGI app's sync parts run on threads of their own). The HTTP rows share one event loop:
    the MCP endpoint's session manager lives in the loop that first used it (a fresh app here,
    its manager shut down at the end)."""
    import importlib

    import config.asgi

    application = importlib.reload(config.asgi).application

    settings.WEBSOCKET_ALLOWED_ORIGINS = ["http://127.0.0.1:8000"]
    settings.AGENT_RUN_RATE_LIMIT_PER_MINUTE = 100_000
    world, clients = _world(admin_user, approver)

    def headers(principal: str, *, csrf: bool = False) -> list[tuple[bytes, bytes]]:
        out = [(b"origin", b"http://127.0.0.1:8000"), (b"host", b"127.0.0.1:8000")]
        cookies = [f"csrftoken={CSRF}"] if csrf else []
        if principal in SESSION:
            cookies.append(f"sessionid={clients[principal].cookies['sessionid'].value}")
        if cookies:
            out.append((b"cookie", "; ".join(cookies).encode()))
        if csrf:
            out.append((b"x-csrftoken", CSRF.encode()))
        if principal in world.tokens:
            out.append((b"authorization", f"Bearer {world.tokens[principal]}".encode()))
        return out

    async def connect(path: str, principal: str) -> int:
        """1 when the socket stays open; else the close code (a refused handshake, or a
        consumer that accepts first and closes with a code the page can read)."""
        comm = WebsocketCommunicator(application, path, headers=headers(principal))
        connected, code = await comm.connect(timeout=5)
        if not connected:
            return code
        try:
            first = await comm.receive_output(timeout=1)
        except TimeoutError:
            first = {}
        with contextlib.suppress(asyncio.CancelledError):  # a consumer that closed has ended
            await comm.disconnect()
        return first.get("code", 1000) if first.get("type") == "websocket.close" else 1

    async def http(row: Row, principal: str) -> int:
        body = _json.dumps(row.data).encode() if row.json else b""
        extra = (
            [
                (b"content-type", b"application/json"),
                (b"accept", b"application/json, text/event-stream"),
            ]
            if row.json
            else []
        )
        scope = {
            "type": "http",
            "method": row.method,
            "path": row.path.format(**vars(world)),
            "query_string": b"",
            "headers": [*headers(principal, csrf=row.method == "POST"), *extra],
            "http_version": "1.1",
            "scheme": "http",
            "server": ("127.0.0.1", 8000),
            "client": ("127.0.0.1", 5000),
        }
        comm = ApplicationCommunicator(application, scope)
        await comm.send_input({"type": "http.request", "body": body})
        start = await comm.receive_output(10)
        await comm.wait(10)
        return start["status"]

    wrong = []
    for route, path, expect in WS_ROWS:
        for principal, code in zip(PRINCIPALS, map(int, expect.split()), strict=True):
            got = asyncio.run(connect(path.format(**vars(world)), principal))
            if got != code:
                wrong.append(f"websocket /{route} {principal}: {got}, expected {code}")

    async def every_http_row() -> None:
        try:
            for row in ASGI_HTTP_ROWS:
                for principal, code in row.statuses().items():
                    got = await http(row, principal)
                    if got != code:
                        wrong.append(f"ASGI {row.method} {row.path} {principal}: {got} != {code}")
        finally:
            mount = application
            while not hasattr(mount, "endpoint"):  # the wrappers around the MCP mount
                mount = mount.application
            await mount.endpoint.shutdown()

    asyncio.run(every_http_row())
    assert not wrong, "\n".join(wrong)
