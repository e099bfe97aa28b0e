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


def test_approver_emails_are_what_the_queryset_read(e17, approver):
    from accounts.selectors import approver_emails
    from tests.accounts.factories import APPROVERS, EMPLOYEES, user_create

    both = user_create("a02", roles=[EMPLOYEES, APPROVERS])
    user_create("a03", roles=[APPROVERS], is_active=False)  # gone: no mail
    user_create("a04", roles=[APPROVERS])  # no address: no mail
    user_create("e30", roles=[EMPLOYEES])  # not an approver
    addresses = {approver.username: "boss@rooms.example", "a02": "a02@rooms.example"}
    addresses |= {"a03": "a03@rooms.example", "a04": "", "e30": "e30@rooms.example"}
    for username, email in addresses.items():
        User.objects.filter(username=username).update(email=email)
    for besides in (e17.pk, approver.pk, both.pk):
        reference = list(
            User.objects.filter(groups__name=Role.APPROVER, is_active=True)
            .exclude(pk=besides)
            .exclude(email="")
            .order_by("id")
            .values_list("email", flat=True)
        )
        assert approver_emails(besides=besides) == reference
    assert approver_emails(besides=e17.pk) == ["boss@rooms.example", "a02@rooms.example"]
    assert approver_emails(besides=approver.pk) == ["a02@rooms.example"]
