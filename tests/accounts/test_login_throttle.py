"""Sign-in throttling against real Redis: per account and per address, locks that grow, refused
before the password is hashed, audited, lifted by an admin; the site's page and /admin/login/."""

from __future__ import annotations

import pytest
from django.contrib.auth.backends import ModelBackend
from django.core.management import call_command
from django.test import Client
from django.urls import reverse

from accounts import throttle
from accounts.models import AuditAction, AuditEntry
from tests.accounts.factories import PASSWORD

pytestmark = pytest.mark.django_db

LOGIN = "/login/"
ADMIN_LOGIN = "/admin/login/"


@pytest.fixture(autouse=True)
def _fresh_counts():
    throttle._redis().flushdb()


@pytest.fixture
def hashed(monkeypatch) -> list[str]:
    """The usernames whose password was checked (hashed), in order."""
    seen: list[str] = []
    original = ModelBackend.authenticate

    def spy(self, request, username=None, password=None, **kwargs):
        seen.append(username)
        return original(self, request, username=username, password=password, **kwargs)

    monkeypatch.setattr(ModelBackend, "authenticate", spy)
    return seen


def sign_in(username: str, password: str, *, url: str = LOGIN, address: str = "10.0.0.1"):
    return Client(REMOTE_ADDR=address).post(url, {"username": username, "password": password})


def signed_in(response) -> bool:
    return response.status_code == 302


def test_five_wrong_passwords_lock_the_account_even_for_the_right_one(e17, hashed):
    for _ in range(5):
        assert sign_in("e17", "wrong-password").status_code == 200
    refused = sign_in("e17", PASSWORD)

    assert refused.status_code == 429
    assert 0 < int(refused["Retry-After"]) <= 60
    assert "Too many failed sign-ins" in refused.text
    assert "_auth_user_id" not in refused.wsgi_request.session
    assert hashed == ["e17"] * 5  # the sixth was refused before its password was hashed


def test_the_lock_is_audited_once_against_the_account(e17):
    for _ in range(7):
        sign_in("e17", "wrong-password", address="10.0.0.9")
    entry = AuditEntry.objects.get(action=AuditAction.LOGIN_LOCKED)
    assert (entry.actor, entry.target) == (e17, f"user:{e17.pk}")
    assert entry.detail == {"scope": "account", "address": "10.0.0.9", "locked_for_s": 60}


def test_each_further_lock_lasts_twice_as_long(e17):
    for expected in (60, 120, 240):
        for _ in range(5):
            sign_in("e17", "wrong-password")
        lock = throttle.login_locked(username="e17", address="10.0.0.2")
        assert lock is not None and expected - 2 <= lock.retry_after_s <= expected
        throttle._redis().delete(throttle._keys("account", throttle._subject("e17"))[1])
    assert AuditEntry.objects.filter(action=AuditAction.LOGIN_LOCKED).count() == 3


def test_a_right_password_clears_the_account_s_count(e17):
    for _ in range(4):
        sign_in("e17", "wrong-password")
    assert signed_in(sign_in("e17", PASSWORD))
    for _ in range(4):
        sign_in("e17", "wrong-password")
    assert signed_in(sign_in("e17", PASSWORD))


def test_the_username_is_counted_as_typed_case_folded(e17):
    for name in ("e17", "E17", " e17", "E17", "e17 "):
        sign_in(name, "wrong-password")
    assert sign_in("e17", PASSWORD).status_code == 429


def test_a_name_that_does_not_exist_locks_the_same_way_and_tells_nothing(e17):
    for _ in range(5):
        sign_in("nobody-here", "wrong-password")
        sign_in("e17", "wrong-password", address="10.0.0.3")
    unknown = sign_in("nobody-here", "x")
    known = sign_in("e17", "x", address="10.0.0.3")
    assert unknown.status_code == known.status_code == 429
    errors = [r.context["form"].non_field_errors() for r in (unknown, known)]
    assert errors[0] == errors[1]
    assert unknown["Retry-After"] == known["Retry-After"]
    assert AuditEntry.objects.filter(action=AuditAction.LOGIN_LOCKED).count() == 1  # e17's


def test_one_address_guessing_many_names_is_locked_and_others_are_not(e17, settings, hashed):
    settings.LOGIN_MAX_FAILURES_PER_ADDRESS = 8
    for n in range(8):
        sign_in(f"guess{n}", "wrong-password", address="10.6.6.6")
    assert sign_in("e17", PASSWORD, address="10.6.6.6").status_code == 429
    assert len(hashed) == 8
    assert signed_in(sign_in("e17", PASSWORD, address="10.0.0.4"))


def test_the_admin_login_is_throttled_the_same_way(admin_user, hashed):
    for _ in range(5):
        assert sign_in(admin_user.username, "wrong-password", url=ADMIN_LOGIN).status_code == 200
    refused = sign_in(admin_user.username, PASSWORD, url=ADMIN_LOGIN)
    assert refused.status_code == 429
    assert int(refused["Retry-After"]) > 0
    assert len(hashed) == 5
    # One count for both doors: the site's page is locked for this account too.
    assert sign_in(admin_user.username, PASSWORD).status_code == 429


def test_an_admin_unlocks_an_account_in_the_admin_audited(e17, admin_user):
    for _ in range(5):
        sign_in("e17", "wrong-password")
    admin = Client()
    admin.force_login(admin_user)
    response = admin.post(
        reverse("admin:accounts_user_changelist"),
        {"action": "unlock_sign_in", "_selected_action": [e17.pk]},
    )
    assert response.status_code == 302
    assert signed_in(sign_in("e17", PASSWORD))
    entry = AuditEntry.objects.get(action=AuditAction.LOGIN_UNLOCKED)
    assert (entry.actor, entry.target) == (admin_user, f"user:{e17.pk}")


def test_a_staff_member_who_is_not_a_superuser_cannot_unlock(e17):
    from tests.accounts.factories import user_create

    staff = user_create("s01")
    staff.is_staff = True
    staff.save()
    for _ in range(5):
        sign_in("e17", "wrong-password")
    client = Client()
    client.force_login(staff)
    client.post(
        reverse("admin:accounts_user_changelist"),
        {"action": "unlock_sign_in", "_selected_action": [e17.pk]},
    )
    assert sign_in("e17", PASSWORD).status_code == 429
    assert not AuditEntry.objects.filter(action=AuditAction.LOGIN_UNLOCKED).exists()


def test_the_unlock_command_lifts_an_account_and_an_address(e17, admin_user, settings):
    settings.LOGIN_MAX_FAILURES_PER_ADDRESS = 5
    for _ in range(5):
        sign_in("e17", "wrong-password", address="10.0.0.7")
    call_command("unlock_login", "e17", "--address=10.0.0.7", f"--by={admin_user.username}")
    assert signed_in(sign_in("e17", PASSWORD, address="10.0.0.7"))
    targets = set(
        AuditEntry.objects.filter(action=AuditAction.LOGIN_UNLOCKED).values_list(
            "target", flat=True
        )
    )
    assert targets == {f"user:{e17.pk}", "address:10.0.0.7"}


def test_while_every_hashing_slot_is_taken_a_sign_in_is_503_and_not_counted(e17, settings, hashed):
    settings.LOGIN_HASH_WAIT_SECONDS = 0.05
    slot = throttle.hashing_slot()
    assert slot.acquire(timeout=1)
    try:
        busy = sign_in("e17", PASSWORD)
    finally:
        slot.release()
    assert busy.status_code == 503
    assert busy["Retry-After"] == "5"
    assert hashed == []
    assert not throttle._redis().exists(throttle._keys("account", throttle._subject("e17"))[0])
    assert signed_in(sign_in("e17", PASSWORD))


def test_with_redis_down_sign_in_fails_closed(e17, monkeypatch, hashed):
    import redis

    dead = redis.Redis(host="127.0.0.1", port=1, socket_connect_timeout=0.2)
    monkeypatch.setattr(throttle, "_redis", lambda: dead)
    refused = sign_in("e17", PASSWORD)
    assert refused.status_code == 503
    assert hashed == []


def test_an_empty_password_is_a_form_error_and_counts_nothing(e17, hashed):
    response = Client().post(LOGIN, {"username": "e17", "password": ""})
    assert response.status_code == 200
    assert hashed == []
    assert not throttle._redis().keys("accounts:login:*")
