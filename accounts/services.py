"""Identity writes."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

from django.db import transaction
from django.utils import timezone

from accounts.models import ApiToken, AuditAction, AuditEntry, User


@transaction.atomic
def token_issue(*, user: User, name: str = "", actor: User | None = None) -> str:
    """Create an API token for ``user`` and return the raw value; only its hash is kept.
    Audited in the same transaction, as done by ``actor`` (the user themself when not given)."""
    raw = ApiToken.generate()
    ApiToken.objects.create(user=user, name=name, prefix=raw[:10], digest=ApiToken.hash(raw))
    audit_record(
        actor=actor or user,
        action=AuditAction.TOKEN_ISSUED,
        target=f"token:{raw[:10]}",
        detail={"user": user.username, "name": name},
    )
    return raw


# How stale a token's last_used_at may get: a write per request (one more statement and commit
# for every GET) bought nothing a minute's precision does not.
LAST_USED_PRECISION = timedelta(seconds=60)


def token_authenticate(*, raw: str) -> User | None:
    """The user of a live token, or None. Records when the token was last used, to the minute."""
    token = (
        ApiToken.objects.select_related("user")
        .filter(digest=ApiToken.hash(raw), revoked_at__isnull=True, user__is_active=True)
        .first()
    )
    if token is None:
        return None
    now = timezone.now()
    if token.last_used_at is None or now - token.last_used_at >= LAST_USED_PRECISION:
        ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
    return token.user


def audit_record(
    *,
    actor: User,
    action: AuditAction,
    target: str,
    run_id: uuid.UUID | str | None = None,
    detail: dict[str, Any] | None = None,
) -> AuditEntry:
    """Append one row to the audit log of human actions.

    Call it inside the transaction of the change it describes, so the change and its audit row
    commit or roll back together. ``detail`` must be JSON that PostgreSQL's jsonb accepts.
    """
    return AuditEntry.objects.create(
        actor=actor, action=action, target=target[:120], run_id=run_id, detail=detail or {}
    )
