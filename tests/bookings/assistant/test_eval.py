"""The assistant's evaluation set (eval_cases.jsonl), against the real database: every case's
end state, delegation and reply, and no booking anybody did not ask for over the whole set, at
the domain level (fast); and through real runs and the real Celery worker for every
conversation and a subset of the single-turn cases of each job and language (end to end)."""

from __future__ import annotations

import pytest

from tests.bookings.assistant.harness import load_cases, reset_case_tables, run_case, users

CASES = load_cases()
SINGLE_PER_JOB = 2  # single-turn cases of each job and language that also run end to end
# Held-out cases moved into the set (issue 37) that the reader does not understand yet: strict
# expected failures, so a case that comes to pass turns the suite red until it leaves this list.
# None of them writes anything wrong (test_no_wrong_booking_over_the_whole_set reads them too).
NOT_YET = frozenset(
    {
        "ho-en-068",
        "ho-en-075",
        "ho-en-090",
        "ho-en-095",
        "ho-en-098",
        "ho-zh-068",
        "h2-en-029",
        "h2-en-074",
        "h2-en-080",
        "h2-en-095",
        "h2-en-097",
        "h2-en-098",
        "h2-zh-029",
        "h2-zh-075",
        "h2-zh-080",
        "h2-zh-084",
        "h2-zh-088",
        "h2-zh-096",
        "h2-zh-099",
        "h3-en-052",
    }
)


def _params(cases: list[dict], *, strict: bool) -> list:
    not_yet = pytest.mark.xfail(strict=strict, reason="not understood yet (README)")
    return [
        pytest.param(c, id=c["id"], marks=[not_yet] if c["id"] in NOT_YET else []) for c in cases
    ]


def live_cases(cases: list[dict]) -> list[dict]:
    """Every conversation, and the first SINGLE_PER_JOB single-turn cases of each (language,
    job); none with a fixed clock (a real run reads the real one)."""
    taken: dict[tuple[str, str], int] = {}
    chosen = []
    for case in cases:
        if "clock" in case:
            continue
        key = (case["lang"], case["expect"]["job"])
        if len(case["turns"]) > 1:
            chosen.append(case)
        elif taken.get(key, 0) < SINGLE_PER_JOB:
            taken[key] = taken.get(key, 0) + 1
            chosen.append(case)
    return chosen


LIVE = live_cases(CASES)


@pytest.fixture
def people(db):
    return users()


def test_the_set_is_large_and_half_chinese() -> None:
    langs = [c["lang"] for c in CASES]
    assert len(CASES) >= 200
    assert langs.count("zh") >= 0.45 * len(CASES)
    assert len({c["id"] for c in CASES}) == len(CASES)
    assert sum(len(c["turns"]) > 1 for c in CASES) >= 20


@pytest.mark.parametrize("case", _params(CASES, strict=True))
def test_case(case, people) -> None:
    verdict = run_case(case, *people)
    assert not verdict.wrong, verdict.problems
    assert verdict.understood, verdict.problems


def test_no_wrong_booking_over_the_whole_set(django_db_blocker, django_db_setup) -> None:
    """0 wrong bookings: each case in its own transaction, rolled back after it."""
    from django.db import transaction

    wrong = []
    with django_db_blocker.unblock(), transaction.atomic():
        people = users()
        for case in CASES:
            with transaction.atomic():
                verdict = run_case(case, *people)
                transaction.set_rollback(True)
            if verdict.wrong:
                wrong.append((case["id"], verdict.problems))
        transaction.set_rollback(True)
    assert wrong == []


def test_the_live_subset_has_every_conversation_and_both_languages() -> None:
    single = [c for c in LIVE if len(c["turns"]) == 1]
    assert all(c in LIVE for c in CASES if len(c["turns"]) > 1 and "clock" not in c)
    assert len(single) >= 20
    assert {c["lang"] for c in single} == {"en", "zh"}
    assert {c["expect"]["job"] for c in single} == {c["expect"]["job"] for c in CASES}


@pytest.mark.integration
@pytest.mark.parametrize("case", _params(LIVE, strict=False))
def test_case_end_to_end(case, worker) -> None:
    """Each turn a real run continuing the first one's conversation, the worker carrying it
    out; the database's end state after the last turn. 0 wrong bookings end to end."""
    verdict = run_case(case, *users(), live=True)
    assert not verdict.wrong, verdict.problems
    assert verdict.understood, verdict.problems


@pytest.mark.integration
def test_no_wrong_booking_over_the_whole_set_end_to_end(worker) -> None:
    """0 wrong bookings through real runs: every case of the set, each turn a run carried out
    by the worker, what each case wrote truncated before the next."""
    from agentops.runtime.redis_client import get_redis

    wrong = []
    for case in CASES:
        reset_case_tables()
        get_redis().flushdb()  # the asker's per-minute limits: one case at a time
        verdict = run_case(case, *users(), live=True)
        if verdict.wrong:
            wrong.append((case["id"], verdict.problems))
    assert wrong == []
