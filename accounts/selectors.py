"""Identity reads."""

from __future__ import annotations

from collections.abc import Iterable
from functools import cache
from typing import Any

from django.contrib.auth.models import Group
from django.db import connection

from accounts.models import AuditEntry, Role, User

# Hand-written on purpose: every governed call reads the roles (the gate, the recheck before
# execution, each planning step); through the ORM the query cost ~1.4 ms on the 2-core machine,
# half of it building the join, this ~0.6 ms (bench/README.md, "runtime overhead"). A statement
# that reads the user anyway can carry the same read as one more column (roles_column): a
# planning step's claim of its turn does (agentops.runtime.store.turn_claim).
_ROLES_SQL = (
    "SELECT g.name FROM {group} g JOIN {link} l ON l.group_id = g.id WHERE l.user_id = {user}"
)


@cache
def _roles_select(user: str) -> str:
    link = User.groups.through._meta.db_table
    return _ROLES_SQL.format(group=Group._meta.db_table, link=link, user=user)


def roles_column(user_id: str) -> str:
    """The roles of the user whose id is the SQL expression ``user_id``, as an array column of a
    larger statement; its value becomes the roles through roles_from."""
    return f"ARRAY({_roles_select(user_id)})"


def roles_from(*, user: User, names: Iterable[str]) -> frozenset[str]:
    """The roles from the user's group names as read just now; a superuser is also an admin."""
    roles = set(names)
    if user.is_superuser:
        roles.add(Role.ADMIN.value)
    return frozenset(roles)


def user_roles(*, user: User) -> frozenset[str]:
    """The names of the user's groups, read from the database on every call (never cached, not
    even by a prefetch, so a removed role takes effect at once); a superuser is also an admin."""
    with connection.cursor() as cursor:
        cursor.execute(_roles_select("%s"), [user.pk])
        return roles_from(user=user, names=[name for (name,) in cursor.fetchall()])


# Hand-written: every approval request e-mails the approvers (approvals.services, in the
# runtime's transaction of the call sent to approval); the queryset (a join through the groups,
# two exclusions) cost more to build than to run.
_APPROVER_EMAILS_SQL = """
SELECT u.email
  FROM accounts_user u
  JOIN accounts_user_groups l ON l.user_id = u.id
  JOIN auth_group g ON g.id = l.group_id
 WHERE g.name = %s AND u.is_active AND u.id <> %s AND u.email <> ''
 ORDER BY u.id
"""


def approver_addresses() -> list[tuple[int, str]]:
    """(id, address) of every active approver with an address, in the order they were created."""
    return list(
        User.objects.filter(is_active=True, groups__name=Role.APPROVER.value)
        .exclude(email="")
        .order_by("pk")
        .values_list("pk", "email")
        .distinct()
    )


def approver_emails(*, besides: Any) -> list[str]:
    """The addresses of the active approvers other than the user of id ``besides`` (an
    approver's own request is not theirs to decide), in the order they were created."""
    with connection.cursor() as cursor:
        cursor.execute(_APPROVER_EMAILS_SQL, [Role.APPROVER.value, besides])
        return [email for (email,) in cursor.fetchall()]


def audit_entries_latest(*, actions: Iterable[str], limit: int = 5) -> list[AuditEntry]:
    """The latest human decisions of these kinds, newest first (e.g. the operators' queue shows
    its last resolved items for context)."""
    return list(
        AuditEntry.objects.filter(action__in=list(actions))
        .select_related("actor")
        .order_by("-at", "-pk")[:limit]
    )
