"""Identity reads."""

from __future__ import annotations

from django.contrib.auth.models import Group

from accounts.models import Role, User


def user_roles(*, user: User) -> frozenset[str]:
    """The names of the user's groups, read from the database on every call (never cached, not
    even by a prefetch, so a removed role takes effect at once); a superuser is also an admin."""
    roles = set(Group.objects.filter(user__pk=user.pk).values_list("name", flat=True))
    if user.is_superuser:
        roles.add(Role.ADMIN.value)
    return frozenset(roles)
