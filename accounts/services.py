"""Identity writes."""

from __future__ import annotations

import functools
import logging
import uuid
from datetime import timedelta
from typing import Any

from django.db import connection, transaction
from django.utils import timezone

from accounts import throttle
from accounts.models import ApiToken, AuditAction, AuditEntry, User
from config import sqlrows

logger = logging.getLogger(__name__)


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


# Hand-written on purpose: every bearer-token request reads its token and user. Through the ORM
# (`select_related` + `filter` + `first`) that cost ~1.4 ms of CPU on the 2-core machine, most of
# it building the query; this statement, built once from the models' metadata, ~0.3 ms
# (bench/README.md, "API reads").
_TOKEN_SQL = (
    "SELECT t.id, t.last_used_at, {user} FROM {token} t JOIN {users} u ON u.id = t.user_id"
    " WHERE t.digest = %s AND t.revoked_at IS NULL AND u.is_active"
)


@functools.cache
def _token_sql() -> str:
    quote = connection.ops.quote_name
    return _TOKEN_SQL.format(
        user=sqlrows.columns(User, "u"),
        token=quote(ApiToken._meta.db_table),
        users=quote(User._meta.db_table),
    )


def token_authenticate(*, raw: str) -> User | None:
    """The active user of a live token, or None. Records when the token was last used, to the
    minute."""
    with connection.cursor() as cursor:
        cursor.execute(_token_sql(), [ApiToken.hash(raw)])
        row = cursor.fetchone()
    if row is None:
        return None
    token_id, last_used_at, *user_values = row
    now = timezone.now()
    if last_used_at is None or now - last_used_at >= LAST_USED_PRECISION:
        ApiToken.objects.filter(pk=token_id).update(last_used_at=now)
    return sqlrows.instance(User, user_values)


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


def login_lockout_record(*, username: str, address: str, scope: str, locked_for_s: int) -> None:
    """Audit a sign-in lock. The audit log names a person, so a lock is recorded against the
    account whose name was tried when there is one (a guesser of names that do not exist
    leaves a warning in the log instead: there is nobody to name)."""
    user = User.objects.filter(username__iexact=username.strip()).first()
    detail = {"scope": scope, "address": address, "locked_for_s": locked_for_s}
    if user is None:
        logger.warning("sign-in locked for an unknown account (%s): %s", scope, detail)
        return
    audit_record(
        actor=user, action=AuditAction.LOGIN_LOCKED, target=f"user:{user.pk}", detail=detail
    )


@transaction.atomic
def login_unlock_by(*, actor: User, user: User) -> int:
    """Lift an account's sign-in lock (an admin's decision), audited; the keys removed."""
    removed = throttle.login_unlock(username=user.get_username())
    audit_record(
        actor=actor,
        action=AuditAction.LOGIN_UNLOCKED,
        target=f"user:{user.pk}",
        detail={"user": user.get_username(), "keys": removed},
    )
    return removed
