from __future__ import annotations

import pytest
from django.contrib.auth.models import Group

from accounts.models import Role, User
from accounts.selectors import user_roles

pytestmark = pytest.mark.django_db


def test_roles_are_the_users_group_names(e17, approver):
    assert user_roles(user=e17) == frozenset({Role.EMPLOYEE})
    assert user_roles(user=approver) >= {Role.APPROVER}
    assert Role.ADMIN not in user_roles(user=approver)


def test_a_user_without_groups_has_no_roles(db):
    user = User.objects.create_user(username="nobody", password="x")

    assert user_roles(user=user) == frozenset()


def test_a_superuser_is_an_admin_without_the_group(db):
    user = User.objects.create_superuser(username="root", password="x")

    assert user_roles(user=user) == frozenset({Role.ADMIN})


def test_a_removed_group_takes_effect_at_once_even_on_a_prefetched_user(e17):
    user = User.objects.prefetch_related("groups").get(pk=e17.pk)
    assert Role.EMPLOYEE in user_roles(user=user)

    e17.groups.remove(Group.objects.get(name=Role.EMPLOYEE))

    assert Role.EMPLOYEE not in user_roles(user=user)


def test_an_added_group_takes_effect_at_once(e17):
    assert Role.APPROVER not in user_roles(user=e17)

    e17.groups.add(Group.objects.get_or_create(name=Role.APPROVER)[0])

    assert Role.APPROVER in user_roles(user=e17)
