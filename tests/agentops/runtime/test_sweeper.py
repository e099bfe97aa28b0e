"""The sweeper settles what a dead process left behind (beat runs it; here it is called)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from agentops.models import IdempotencyRecord
from agentops.runtime import sweeper
from agentops.runtime.idempotency import idempotency_claim, request_digest
from bookings.services import booking_reserve
from tests.conftest import slot

pytestmark = [
    pytest.mark.integration,
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("rooms"),
]


def abandoned_claim(user, key: str) -> IdempotencyRecord:
    digest = request_digest(tool="reserve_room", subject_id=user.pk, params={"k": key})
    assert (
        idempotency_claim(key=key, tool="reserve_room", subject_id=user.pk, digest=digest).state
        == "owner"
    )
    IdempotencyRecord.objects.filter(key=key).update(
        created_at=timezone.now() - timedelta(minutes=5)
    )
    return IdempotencyRecord.objects.get(key=key)


def test_abandoned_claim_whose_write_committed_replays_the_receipt(e17):
    key = f"api:{e17.pk}:died-after-commit"
    abandoned_claim(e17, key)
    start, end = slot(days=5)
    code = booking_reserve(
        user=e17, room_code="R7", start_at=start, end_at=end, attendees=2, idempotency_key=key
    ).booking.code

    assert sweeper.sweep()["settled_claims"] == 1

    record = IdempotencyRecord.objects.get(key=key)
    assert record.status == "completed"
    assert record.response["ok"] and record.response["data"]["booking_id"] == code


def test_abandoned_claim_whose_write_never_happened_is_released(e17):
    key = f"api:{e17.pk}:died-before-write"
    abandoned_claim(e17, key)

    assert sweeper.sweep()["settled_claims"] == 1

    assert not IdempotencyRecord.objects.filter(key=key).exists()  # a retry with the key runs again


def test_recent_claims_are_left_alone(e17):
    key = f"api:{e17.pk}:still-running"
    digest = request_digest(tool="reserve_room", subject_id=e17.pk, params={})
    idempotency_claim(key=key, tool="reserve_room", subject_id=e17.pk, digest=digest)

    assert sweeper.sweep()["settled_claims"] == 0
    assert IdempotencyRecord.objects.get(key=key).status == "in_progress"
