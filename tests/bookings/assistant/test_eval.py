"""The assistant's evaluation set (eval_cases.jsonl), against the real database: every case's
end state, delegation and reply, and no booking anybody did not ask for over the whole set."""

from __future__ import annotations

import pytest

from tests.bookings.assistant.harness import load_cases, run_case, users

CASES = load_cases()


@pytest.fixture
def people(db):
    return users()


def test_the_set_is_large_and_half_chinese() -> None:
    langs = [c["lang"] for c in CASES]
    assert len(CASES) >= 200
    assert langs.count("zh") >= 0.45 * len(CASES)
    assert len({c["id"] for c in CASES}) == len(CASES)
    assert sum(len(c["turns"]) > 1 for c in CASES) >= 20


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
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
