"""The assistant's screens: the request box starts runs through run_start (one run per form,
however often it is sent), the run card shows the trace from the database and connects to the
run's socket while the run is live, past runs link to their pages, watchers as on the socket."""

from __future__ import annotations

import re
import uuid
from html import unescape

import pytest
from django.db import transaction
from django.test import Client
from django.urls import reverse

from agentops.models import AgentRun, RunOutcome, RunStatus, TraceEvent
from agentops.runtime import ratelimit
from agentops.runtime.direct import tool_call_governed
from agentops.runtime.locks import lock_run
from agentops.runtime.redis_client import get_redis
from agentops.runtime.runs import run_start
from agentops.runtime.transitions import run_move
from console import views
from tests.agentops.factories import run_create
from tests.conftest import slot
from tests.workers import wait_for_run

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("rooms")]

ASSISTANT = reverse("assistant:assistant")
START = reverse("assistant:start")
ZH = {"HTTP_ACCEPT_LANGUAGE": "zh-CN,zh;q=0.9"}


@pytest.fixture(autouse=True)
def _fresh_rate_limits():
    get_redis().flushdb()


def signed_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def run_url(run: AgentRun) -> str:
    return reverse("assistant:run", kwargs={"run_id": run.pk})


def form_key(html: str) -> str:
    return re.search(r'name="key" value="([0-9a-f-]{36})"', html).group(1)


def test_the_page_has_a_request_box_with_a_one_time_key_and_the_menu_links_it(e17):
    client = signed_in(e17)
    first, second = client.get(ASSISTANT), client.get(ASSISTANT)

    html = first.content.decode()
    assert first.status_code == 200
    assert f'href="{ASSISTANT}" aria-current="page"' in html
    assert 'name="request"' in html
    assert form_key(html) != form_key(second.content.decode())


def test_sending_the_form_twice_starts_one_run_and_both_land_on_it(e17):
    client = signed_in(e17)
    data = {"request": "hello, what can you do?", "key": str(uuid.uuid4())}
    first = client.post(START, data)
    events = TraceEvent.objects.count()
    second = client.post(START, data)

    run = AgentRun.objects.get()
    assert (first.status_code, second.status_code) == (302, 302)
    assert first["Location"] == second["Location"] == run_url(run)
    assert (run.subject, run.goal) == (e17, "hello, what can you do?")
    assert TraceEvent.objects.count() == events


def test_the_same_form_with_another_request_starts_nothing(e17):
    client = signed_in(e17)
    key = str(uuid.uuid4())
    client.post(START, {"request": "hello", "key": key})
    events = TraceEvent.objects.count()
    response = client.post(START, {"request": "book R7 tomorrow", "key": key})

    assert response.status_code == 409
    assert AgentRun.objects.count() == 1
    assert TraceEvent.objects.count() == events
    assert form_key(response.content.decode()) != key  # a fresh form to send again


@pytest.mark.parametrize(
    "data",
    [{"request": "", "key": str(uuid.uuid4())}, {"request": "hi", "key": "nope"}, {}],
    ids=["empty", "bad_key", "nothing"],
)
def test_a_bad_form_is_400_and_starts_nothing(e17, data):
    response = signed_in(e17).post(START, data)

    assert response.status_code == 400
    assert not AgentRun.objects.exists()


def test_too_many_runs_is_429_worded_in_the_requests_language_and_starts_nothing(
    e17, settings, monkeypatch
):
    settings.AGENT_RUN_RATE_LIMIT_PER_MINUTE = 1
    # The middle of one window: both posts fall into it, whatever the wall clock says.
    monkeypatch.setattr(ratelimit.run_starts, "clock", lambda: 1_800_000_030.0)
    client = signed_in(e17)
    client.post(START, {"request": "hello", "key": str(uuid.uuid4())})
    before = AgentRun.objects.count()

    response = client.post(START, {"request": "帮我订明天的会议室", "key": str(uuid.uuid4())})

    assert response.status_code == 429
    assert "你这一分钟内的请求太多了" in unescape(response.content.decode())
    assert AgentRun.objects.count() == before


def test_a_live_run_page_shows_the_trace_so_far_and_connects_after_its_last_event(e17):
    run = run_start(user=e17, request_text="book a room tomorrow 14:00-15:00 for 3 people")
    html = signed_in(e17).get(run_url(run)).content.decode()

    last = run.events.order_by("-seq").first().seq
    assert f'ws-connect="/ws/runs/{run.pk}/?after={last}&amp;format=html&amp;lang=en"' in html
    assert 'data-kind="run_started"' in html
    assert "3 people" in html
    assert 'data-status="running"' in html


def test_a_finished_run_page_shows_the_reply_and_does_not_connect(e17):
    tool_call_governed(user=e17, name="list_my_bookings", arguments={})
    run = AgentRun.objects.get()
    html = signed_in(e17).get(run_url(run)).content.decode()

    assert "ws-connect" not in html
    assert 'data-kind="run_finished"' in html
    assert "data-reply" in html


def test_past_runs_are_listed_newest_first_with_their_outcome_and_link(e17):
    client = signed_in(e17)
    older = run_start(user=e17, request_text="hello")
    newer = run_start(user=e17, request_text="what can you do?")
    html = client.get(ASSISTANT).content.decode()

    assert html.index(run_url(newer)) < html.index(run_url(older))
    assert 'data-status="running"' in html


def test_someone_elses_run_page_is_404_and_an_admins_is_200(e17, e23, admin_user):
    run = run_start(user=e23, request_text="hello")

    assert signed_in(e17).get(run_url(run)).status_code == 404
    assert signed_in(e17).get(reverse("assistant:run", args=[uuid.uuid4()])).status_code == 404
    assert signed_in(admin_user).get(run_url(run)).status_code == 200


def test_the_page_speaks_chinese_to_a_chinese_browser(e17):
    run = run_start(user=e17, request_text="帮我订明天下午两点到三点的会议室，3 个人，要有投影")
    html = unescape(signed_in(e17).get(run_url(run), **ZH).content.decode())

    assert "助手" in html
    assert "已理解" in html
    assert "3 人" in html
    assert "lang=zh-hans" in html
    for english in ("Assistant", "Understood", "Your requests", "working"):
        assert english not in html


def test_signed_out_the_page_goes_to_the_login(client):
    response = client.get(ASSISTANT)
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login"))


def test_an_approver_may_open_a_run_that_waits_for_an_approver_and_no_other(worker, e17, approver):
    start, _ = slot(days=5, hour=10)
    run = run_start(user=e17, request_text=f"book R16 on {start:%Y-%m-%d} 10:00-11:00 for 4 people")
    wait_for_run(run.pk, statuses=("waiting_approval",))
    plain = run_start(user=e17, request_text="hello")
    response = signed_in(approver).get(run_url(run))

    html = response.content.decode()
    assert response.status_code == 200
    assert 'data-kind="approval_requested"' in html
    assert signed_in(approver).get(run_url(plain)).status_code == 404


@pytest.mark.parametrize(
    ("to", "live"),
    [(RunStatus.WAITING_APPROVAL, True), (RunStatus.SUCCEEDED, False)],
    ids=["sent-to-an-approver", "finished"],
)
def test_a_run_that_moves_while_its_page_is_read_shows_the_status_its_events_leave(
    e17, monkeypatch, to, live
):
    """The page reads the run, then its events: a move the worker commits in between must not
    leave the card's status behind the events it shows, since no later event would set it
    right (a run waiting for an approver hears nothing until the decision)."""
    run = run_create(e17, status="running")
    real = views.run_get_for_viewer

    def then_it_moves(**kwargs):
        found = real(**kwargs)
        with transaction.atomic():
            run_move(lock_run(run.pk), to, outcome=None if live else RunOutcome.ANSWERED)
        return found

    monkeypatch.setattr(views, "run_get_for_viewer", then_it_moves)
    html = signed_in(e17).get(run_url(run)).content.decode()

    assert f'<span id="run-status"><span class="badge run-status-{to}"' in html
    assert f'<span id="past-{run.pk}-status"><span class="badge run-status-{to}"' in html
    assert ("ws-connect" in html) is live
    last = run.events.order_by("-seq").first().seq
    assert last == 2 and (f"after={last}&amp;" in html) is live
