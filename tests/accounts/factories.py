"""Users and their roles, built per test.

The user model is read through `get_user_model()` and roles are plain Django groups, so these
factories do not care which app owns the user model.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group

PASSWORD = "test-pass"  # test-only
EMPLOYEES, APPROVERS, ADMINS = "employees", "approvers", "admins"

_serial = itertools.count(1)


def group_get(name: str) -> Group:
    return Group.objects.get_or_create(name=name)[0]


def user_create(
    username: str | None = None,
    *,
    employee_id: str | None = None,
    department: str = "Engineering",
    roles: Iterable[str] = (EMPLOYEES,),
    password: str = PASSWORD,
    first_name: str = "",
    is_superuser: bool = False,
    is_active: bool = True,
):
    """Create a user in the given role groups. The employee id defaults to the upper-cased
    username (`e17` -> `E17`); a superuser is staff too."""
    username = username or f"u{next(_serial)}"
    user = get_user_model().objects.create_user(
        username=username,
        password=password,
        employee_id=employee_id or username.upper(),
        department=department,
        first_name=first_name,
        is_staff=is_superuser,
        is_superuser=is_superuser,
        is_active=is_active,
    )
    user.groups.add(*(group_get(role) for role in roles))
    return user
