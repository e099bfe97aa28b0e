"""The idempotency table: Stripe's semantics for writes, keyed by the host, never by the model."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from django.db import connection
from django.utils import timezone

from agentops.contract import canonical_json
from agentops.models import IdempotencyRecord, IdempotencyStatus
from agentops.runtime.timing import IDEMPOTENCY_TTL


def request_digest(*, tool: str, subject_id: int, params: dict[str, Any]) -> str:
    """The intent's digest: tool + validated parameters + subject."""
    text = canonical_json({"tool": tool, "subject": subject_id, "params": params})
    return hashlib.sha256(text.encode()).hexdigest()


class ClaimState(StrEnum):
    OWNER = "owner"  # this call holds the key: make the write
    REPLAY = "replay"  # the key's call finished: answer its stored response
    REUSE = "reuse"  # the key was used for other parameters: refuse
    IN_PROGRESS = "in_progress"  # another call holds the key right now


@dataclass(frozen=True)
class Claim:
    state: ClaimState
    response: dict[str, Any] | None = None


def idempotency_claim(*, key: str, tool: str, subject_id: int, digest: str) -> Claim:
    """Take the key for this call, or say why not. The claim commits on its own (autocommit or
    the caller's transaction), so a concurrent duplicate sees it at once.

    Hand-written SQL on purpose: INSERT ... ON CONFLICT DO NOTHING RETURNING is the claim itself
    (one statement, no exception, no savepoint); the ORM has no insert that says whether the row
    was taken."""
    for _ in range(2):  # the holder may release the key between our insert and our read
        now = timezone.now()
        with connection.cursor() as cursor:
            cursor.execute(
                """
                INSERT INTO agentops_idempotencyrecord
                       (key, tool, subject_id, request_digest, status, created_at, expires_at)
                VALUES (%s, %s, %s, %s, 'in_progress', %s, %s)
                ON CONFLICT (key) DO NOTHING
                RETURNING id
                """,
                [key, tool, subject_id, digest, now, now + IDEMPOTENCY_TTL],
            )
            if cursor.fetchone() is not None:
                return Claim(ClaimState.OWNER)
        record = IdempotencyRecord.objects.filter(key=key).first()
        if record is None:
            continue
        if record.request_digest != digest:
            return Claim(ClaimState.REUSE)
        if record.status == IdempotencyStatus.COMPLETED:
            return Claim(ClaimState.REPLAY, record.response)
        return Claim(ClaimState.IN_PROGRESS)
    return Claim(ClaimState.IN_PROGRESS)


def idempotency_complete(*, key: str, response: dict[str, Any]) -> None:
    """Store the finished call's response under its key (hand-written like the claim: one
    prepared statement instead of the ORM's update, ~0.4 ms less per write)."""
    field = IdempotencyRecord._meta.get_field("response")
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE agentops_idempotencyrecord SET status = %s, response = %s, completed_at = %s"
            " WHERE key = %s",
            [
                IdempotencyStatus.COMPLETED.value,
                field.get_db_prep_save(response, connection),
                timezone.now(),
                key,
            ],
        )


def idempotency_release(*, key: str) -> None:
    """Give the key back when the call is known not to have happened (so a retry may run)."""
    IdempotencyRecord.objects.filter(key=key, status=IdempotencyStatus.IN_PROGRESS).delete()
