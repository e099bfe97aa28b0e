"""Identity reads."""

from __future__ import annotations

from django.contrib.auth.models import Group
from django.db import connection

from accounts.models import Role, User

# Hand-written on purpose: every governed call reads the roles (the gate, the recheck before
# execution, each planning step); through the ORM the query cost ~1.4 ms on the 2-core machine,
# half of it building the join, this ~0.6 ms (bench/README.md, "runtime overhead").
_ROLES_SQL = "SELECT g.name FROM {group} g JOIN {link} l ON l.group_id = g.id WHERE l.user_id = %s"


def user_roles(*, user: User) -> frozenset[str]:
    """The names of the user's groups, read from the database on every call (never cached, not
    even by a prefetch, so a removed role takes effect at once); a superuser is also an admin."""
    sql = _ROLES_SQL.format(group=Group._meta.db_table, link=User.groups.through._meta.db_table)
    with connection.cursor() as cursor:
        cursor.execute(sql, [user.pk])
        roles = {name for (name,) in cursor.fetchall()}
    if user.is_superuser:
        roles.add(Role.ADMIN.value)
    return frozenset(roles)
