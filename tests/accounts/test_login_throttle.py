"""Sign-in throttling against real Redis, after django-axes' lockout by account and address
together: a pair locks, an address guessing many names locks, an account guessed at from many
addresses is slowed down but never locked; a browser that signed in before keeps its owner in;
refused before the password is hashed, audited, lifted by an admin; the site's page and
/admin/login/ alike."""

from __future__ import annotations

import threading
import time

import pytest
from django.contrib.auth.backends import ModelBackend
from django.contrib.auth.hashers import MD5PasswordHasher
from django.core.management import call_command
from django.db import connection
from django.test import Client
from django.urls import reverse

from accounts import throttle
from accounts.models import AuditAction, AuditEntry
from tests.accounts.factories import PASSWORD, user_create

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


def sign_in(
    username: str,
    password: str,
    *,
    url: str = LOGIN,
    address: str = "10.0.0.1",
    client: Client | None = None,
    **headers: str,
):
    client = client or Client(REMOTE_ADDR=address)
    return client.post(url, {"username": username, "password": password}, **headers)


def signed_in(response) -> bool:
    return response.status_code == 302


def locks() -> list[str]:
    return sorted(k.decode() for k in throttle._redis().scan_iter("accounts:login:*:lock"))


# --- the pair ----------------------------------------------------------------------------------


def test_five_wrong_passwords_lock_that_account_from_that_address(e17, hashed):
    for _ in range(5):
        assert sign_in("e17", "wrong-password").status_code == 200
    refused = sign_in("e17", PASSWORD)

    assert refused.status_code == 429
    assert 0 < int(refused["Retry-After"]) <= 60
    assert "Too many failed sign-ins" in refused.text
    assert "_auth_user_id" not in refused.wsgi_request.session
    assert hashed == ["e17"] * 5  # the sixth was refused before its password was hashed


def test_the_right_password_from_another_address_is_not_refused_for_someone_else_s_guesses(e17):
    for n in range(4):  # four guessers, each locked out of e17 from its own address
        for _ in range(6):
            sign_in("e17", "wrong-password", address=f"10.6.6.{n}")
    assert sign_in("e17", PASSWORD, address="10.6.6.0").status_code == 429
    assert signed_in(sign_in("e17", PASSWORD, address="192.0.2.44"))


def test_the_lock_is_audited_once_against_the_account_with_the_address(e17):
    for _ in range(7):
        sign_in("e17", "wrong-password", address="10.0.0.9")
    entry = AuditEntry.objects.get(action=AuditAction.LOGIN_LOCKED)
    assert (entry.actor, entry.target) == (e17, f"user:{e17.pk}")
    assert entry.detail == {"scope": "pair", "address": "10.0.0.9", "locked_for_s": 60}


def test_each_further_lock_of_a_pair_lasts_twice_as_long(e17):
    client = throttle.SignInClient(address="10.0.0.1")
    for expected in (60, 120, 240):
        for _ in range(5):
            sign_in("e17", "wrong-password")
        standing = throttle.login_standing(username="e17", client=client)
        assert standing.lock is not None
        assert expected - 2 <= standing.lock.retry_after_s <= expected
        throttle._redis().delete(*locks())
    assert AuditEntry.objects.filter(action=AuditAction.LOGIN_LOCKED).count() == 3


def test_a_right_password_clears_the_pair_s_count(e17):
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


# --- the account's slower bound: a delay, never a lock ------------------------------------------


def test_an_account_guessed_at_from_many_addresses_is_slowed_down_not_locked(e17, settings):
    settings.LOGIN_ACCOUNT_SLOW_AFTER = 6
    settings.LOGIN_ACCOUNT_DELAY_SECONDS = 0.4
    for n in range(6):
        sign_in("e17", "wrong-password", address=f"10.7.0.{n}")
    assert not locks()

    started = time.monotonic()
    for n in range(3):
        assert sign_in("e17", "wrong-password", address=f"10.7.1.{n}").status_code == 200
    assert time.monotonic() - started >= 0.75  # spaced: the 2nd and 3rd waited for their turn
    assert signed_in(sign_in("e17", PASSWORD, address="192.0.2.45"))
    assert not locks()


def test_a_turn_further_off_than_a_sign_in_may_wait_is_429_with_when_to_come_back(
    e17, settings, hashed
):
    settings.LOGIN_ACCOUNT_SLOW_AFTER = 1
    settings.LOGIN_ACCOUNT_DELAY_SECONDS = 30
    settings.LOGIN_HASH_WAIT_SECONDS = 1
    sign_in("e17", "wrong-password", address="10.7.2.1")
    sign_in("e17", "wrong-password", address="10.7.2.2")  # takes the next turn, at once
    later = sign_in("e17", PASSWORD, address="10.7.2.3")
    assert later.status_code == 429
    assert 25 <= int(later["Retry-After"]) <= 30
    assert "slowed down" in later.text
    assert hashed == ["e17", "e17"]
    assert not locks()


# --- /admin/login/ -------------------------------------------------------------------------------


def test_a_non_staff_employee_at_the_admin_login_with_the_right_password_is_no_failure(e17):
    for _ in range(6):
        refused = sign_in("e17", PASSWORD, url=ADMIN_LOGIN)
        assert refused.status_code == 200  # the admin's "a staff account" message
    assert not throttle._redis().keys("accounts:login:*failures")
    assert signed_in(sign_in("e17", PASSWORD))


def test_wrong_passwords_at_the_admin_login_lock_the_pair_only(admin_user, hashed):
    for _ in range(5):
        assert sign_in(admin_user.username, "wrong-password", url=ADMIN_LOGIN).status_code == 200
    refused = sign_in(admin_user.username, PASSWORD, url=ADMIN_LOGIN)
    assert refused.status_code == 429
    assert int(refused["Retry-After"]) > 0
    assert len(hashed) == 5
    # One count for both doors, by the same pair: the site's page from this address is locked,
    # from another address it is not.
    assert sign_in(admin_user.username, PASSWORD).status_code == 429
    assert signed_in(sign_in(admin_user.username, PASSWORD, address="192.0.2.46"))


# --- a browser that signed in before ------------------------------------------------------------


def test_a_browser_that_signed_in_before_is_not_locked_by_guesses_from_its_own_address(e17):
    browser = Client(REMOTE_ADDR="10.0.0.1")
    assert signed_in(sign_in("e17", PASSWORD, client=browser))
    assert throttle.DEVICE_COOKIE in browser.cookies
    cookie = browser.cookies[throttle.DEVICE_COOKIE]
    assert cookie["httponly"] and cookie["samesite"] == "Lax"
    browser.post(reverse("logout"))

    for _ in range(6):  # someone behind the same address (a shared NAT) guesses
        sign_in("e17", "wrong-password", address="10.0.0.1")
    assert sign_in("e17", PASSWORD, address="10.0.0.1").status_code == 429
    assert signed_in(sign_in("e17", PASSWORD, client=browser))


def test_a_device_cookie_vouches_for_its_own_account_only(e17, e23):
    browser = Client(REMOTE_ADDR="10.0.0.1")
    assert signed_in(sign_in("e17", PASSWORD, client=browser))
    browser.post(reverse("logout"))
    for _ in range(5):
        sign_in("e23", "wrong-password", client=browser)
    assert sign_in("e23", PASSWORD, client=browser).status_code == 429


def test_a_forged_device_cookie_is_ignored(e17):
    for _ in range(5):
        sign_in("e17", "wrong-password")
    forged = Client(REMOTE_ADDR="10.0.0.1")
    forged.cookies[throttle.DEVICE_COOKIE] = "e30:forged:value"
    assert sign_in("e17", PASSWORD, client=forged).status_code == 429


# A check that costs time but no CPU: the storm tests measure the queue for the hashing slots,
# not how busy the machine is. Five guesses x 0.25 s behind one slot would take over a second.
class SlowHasher(MD5PasswordHasher):
    algorithm = "slow_md5"

    def verify(self, password: str, encoded: str) -> bool:
        time.sleep(0.25)
        return super().verify(password, encoded)


def _guess(username: str, address: str) -> None:
    try:
        sign_in(username, "wrong-password", address=address)
    finally:
        connection.close()


def _storm(username: str, n: int) -> list[threading.Thread]:
    """n wrong guesses for username at once, each from an address of its own."""
    threads = [threading.Thread(target=_guess, args=(username, f"10.9.9.{i}")) for i in range(n)]
    for thread in threads:
        thread.start()
    return threads


def _joined(threads: list[threading.Thread]) -> None:
    for thread in threads:
        thread.join(timeout=30)
        assert not thread.is_alive(), "a guess did not finish in 30 s"


@pytest.mark.django_db(transaction=True)
def test_a_known_browser_signs_in_within_a_second_during_a_storm_of_guesses(settings):
    settings.PASSWORD_HASHERS = [f"{__name__}.SlowHasher"]
    user_create("e71")
    browser = Client(REMOTE_ADDR="192.0.2.7")
    assert signed_in(sign_in("e71", PASSWORD, client=browser))
    browser.post(reverse("logout"))

    threads = _storm("e71", 8)
    time.sleep(0.1)  # the guesses hold the hashing slot and queue for it
    started = time.monotonic()
    response = sign_in("e71", PASSWORD, client=browser)
    took = time.monotonic() - started
    _joined(threads)
    assert signed_in(response), response.status_code
    assert took < 1.0


@pytest.mark.django_db(transaction=True)
def test_the_right_password_from_a_new_address_during_a_storm_is_answered_not_busy(settings):
    settings.PASSWORD_HASHERS = [f"{__name__}.SlowHasher"]
    user_create("e72")
    threads = _storm("e72", 8)
    time.sleep(0.1)
    response = sign_in("e72", PASSWORD, address="192.0.2.8")
    _joined(threads)
    assert signed_in(response), response.status_code


def test_an_address_with_recent_failures_waits_behind_one_without(settings):
    slots = throttle.HashingSlots(shared=1, reserved=1)
    assert slots.acquire(throttle.Priority.CLEAN, timeout=1)
    order: list[str] = []

    def take(name: str, priority: throttle.Priority) -> None:
        assert slots.acquire(priority, timeout=5)
        order.append(name)
        time.sleep(0.05)
        slots.release()

    suspect = threading.Thread(target=take, args=("suspect", throttle.Priority.SUSPECT))
    suspect.start()
    time.sleep(0.1)
    clean = threading.Thread(target=take, args=("clean", throttle.Priority.CLEAN))
    clean.start()
    time.sleep(0.1)
    assert slots.acquire(throttle.Priority.TRUSTED, timeout=0.01)  # the reserved slot
    slots.release()
    slots.release()
    _joined([suspect, clean])
    assert order == ["clean", "suspect"]


# --- the client's address ------------------------------------------------------------------------


def test_x_forwarded_for_is_ignored_unless_the_peer_is_a_named_proxy(e17, settings):
    settings.TRUSTED_PROXIES = []
    for n in range(6):  # a new X-Forwarded-For each time: still one address, 127.0.0.1
        sign_in("e17", "wrong-password", address="127.0.0.1", HTTP_X_FORWARDED_FOR=f"10.1.1.{n}")
    assert sign_in("e17", PASSWORD, address="127.0.0.1").status_code == 429
    assert locks() == [f"accounts:login:pair:{throttle._subject('e17')}:127.0.0.1:lock"]


def test_behind_a_named_proxy_the_client_is_the_last_address_it_did_not_add(e17, settings):
    settings.TRUSTED_PROXIES = ["10.0.0.2/32", "10.10.0.0/16"]
    proxied = Client(REMOTE_ADDR="10.0.0.2")
    # What the client wrote itself (left) is not believed; the hop the proxies saw is.
    for n in range(5):
        sign_in(
            "e17",
            "wrong-password",
            client=proxied,
            HTTP_X_FORWARDED_FOR=f"1.1.1.{n}, 198.51.100.9, 10.10.3.4",
        )
    assert locks() == [f"accounts:login:pair:{throttle._subject('e17')}:198.51.100.9:lock"]
    assert signed_in(
        sign_in(
            "e17", PASSWORD, client=Client(REMOTE_ADDR="10.0.0.2"), HTTP_X_FORWARDED_FOR="1.2.3.4"
        )
    )


def test_make_run_s_web_server_believes_no_forwarded_header():
    from uvicorn.main import main as uvicorn_command

    from config.run import web_argv

    argv = web_argv("127.0.0.1", 8000)
    options = argv[argv.index("config.asgi:application") + 1 :]
    params = uvicorn_command.make_context("uvicorn", ["config.asgi:application", *options]).params
    assert params["proxy_headers"] is False


# --- unlocking -----------------------------------------------------------------------------------


def test_an_admin_unlocks_an_account_in_the_admin_audited(e17, admin_user):
    for address in ("10.0.0.1", "10.0.0.2"):
        for _ in range(5):
            sign_in("e17", "wrong-password", address=address)
    admin = Client()
    admin.force_login(admin_user)
    response = admin.post(
        reverse("admin:accounts_user_changelist"),
        {"action": "unlock_sign_in", "_selected_action": [e17.pk]},
    )
    assert response.status_code == 302
    assert signed_in(sign_in("e17", PASSWORD, address="10.0.0.1"))
    assert signed_in(sign_in("e17", PASSWORD, address="10.0.0.2"))
    entry = AuditEntry.objects.get(action=AuditAction.LOGIN_UNLOCKED)
    assert (entry.actor, entry.target) == (admin_user, f"user:{e17.pk}")


def test_a_staff_member_who_is_not_a_superuser_cannot_unlock(e17):
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


def test_unlocking_an_address_lifts_its_pairs_too(e17, admin_user):
    for _ in range(5):
        sign_in("e17", "wrong-password", address="10.0.0.8")
    call_command("unlock_login", "--address=10.0.0.8", f"--by={admin_user.username}")
    assert signed_in(sign_in("e17", PASSWORD, address="10.0.0.8"))


# --- when the throttle cannot count ---------------------------------------------------------------


def test_while_every_hashing_slot_is_taken_a_sign_in_is_503_and_not_counted(e17, settings, hashed):
    settings.LOGIN_HASH_WAIT_SECONDS = 0.05
    slots = throttle.hashing_slots()
    assert slots.acquire(throttle.Priority.CLEAN, timeout=1)
    try:
        busy = sign_in("e17", PASSWORD)
    finally:
        slots.release()
    assert busy.status_code == 503
    assert busy["Retry-After"] == "5"
    assert hashed == []
    assert not throttle._redis().keys("accounts:login:*failures")
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
