"""The password policy (AUTH_PASSWORD_VALIDATORS) holds on every form that sets a password and on
createsuperuser, and the demo logins meet it."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client
from django.urls import reverse

from accounts.models import AuditEntry
from bookings.demo import USERS, demo_password, load_demo_data

pytestmark = pytest.mark.django_db

WEAK = ["a", "admin", "password", "12345678", "password1234", "123456789012", "root-root"]


@pytest.fixture
def admin_client(admin_user) -> Client:
    client = Client()
    client.force_login(admin_user)
    return client


@pytest.mark.parametrize("weak", WEAK)
def test_weak_passwords_are_refused_by_the_validators(weak):
    with pytest.raises(ValidationError):
        validate_password(weak, get_user_model()(username="root"))


def test_a_password_like_the_username_is_refused():
    with pytest.raises(ValidationError, match="too similar"):
        validate_password("margaret-h", get_user_model()(username="margaret-h"))


def test_every_demo_login_meets_the_policy_and_the_loader_sets_it():
    for username, *_ in USERS:
        validate_password(demo_password(username), get_user_model()(username=username))
    load_demo_data()
    for username, *_ in USERS:
        assert Client().login(username=username, password=demo_password(username))


@pytest.mark.parametrize("weak", WEAK)
def test_the_admin_refuses_to_add_a_user_with_a_weak_password(admin_client, weak):
    users, audits = get_user_model().objects.count(), AuditEntry.objects.count()
    response = admin_client.post(
        reverse("admin:accounts_user_add"),
        {"username": "newbie", "usable_password": "true", "password1": weak, "password2": weak},
    )
    assert response.status_code == 200  # the form again, with the validators' messages
    assert response.context["adminform"].form.errors
    assert get_user_model().objects.count() == users
    assert AuditEntry.objects.count() == audits


def test_the_admin_adds_a_user_with_a_strong_password(admin_client):
    strong = "correct horse battery staple"
    response = admin_client.post(
        reverse("admin:accounts_user_add"),
        {"username": "newbie", "usable_password": "true", "password1": strong, "password2": strong},
    )
    assert response.status_code == 302
    assert get_user_model().objects.get(username="newbie").check_password(strong)


@pytest.mark.parametrize("weak", WEAK)
def test_the_admin_refuses_to_change_a_password_to_a_weak_one(admin_client, e17, weak):
    before = get_user_model().objects.get(pk=e17.pk).password
    response = admin_client.post(
        reverse("admin:auth_user_password_change", args=[e17.pk]),
        {"password1": weak, "password2": weak, "usable_password": "true"},
    )
    assert response.status_code == 200
    assert response.context["form"].errors
    assert get_user_model().objects.get(pk=e17.pk).password == before


@pytest.mark.parametrize("weak", ["admin", "12345678"])
def test_createsuperuser_without_input_validates_the_password(monkeypatch, weak):
    monkeypatch.setenv("DJANGO_SUPERUSER_PASSWORD", weak)
    users = get_user_model().objects.count()
    with pytest.raises(CommandError, match=r"too short|too common|entirely numeric"):
        call_command(
            "createsuperuser", "--noinput", "--username=root", "--email=root@rooms.example"
        )
    assert get_user_model().objects.count() == users


def test_createsuperuser_without_input_accepts_a_strong_password(monkeypatch):
    monkeypatch.setenv("DJANGO_SUPERUSER_PASSWORD", "correct horse battery staple")
    call_command("createsuperuser", "--noinput", "--username=root", "--email=root@rooms.example")
    root = get_user_model().objects.get(username="root")
    assert root.is_superuser and root.check_password("correct horse battery staple")


def test_createsuperuser_interactively_offers_no_bypass(monkeypatch, capsys):
    """A weak password is asked again (the bypass question answers itself "n"), then a strong
    one is taken."""
    from django.contrib.auth.management.commands import createsuperuser

    typed = iter(["root", "root@rooms.example"])
    secrets = iter(["admin", "admin", *(["correct horse battery staple"] * 2)])
    monkeypatch.setattr(createsuperuser.getpass, "getpass", lambda prompt="": next(secrets))
    monkeypatch.setattr("builtins.input", lambda prompt="": next(typed))

    class TTY:
        def isatty(self) -> bool:
            return True

    call_command("createsuperuser", interactive=True, stdin=TTY())

    root = get_user_model().objects.get(username="root")
    assert root.check_password("correct horse battery staple")
    assert not root.check_password("admin")
    assert "too short" in capsys.readouterr().err
