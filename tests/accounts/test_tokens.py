from __future__ import annotations

import io

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from accounts.models import ApiToken
from accounts.services import token_authenticate

pytestmark = pytest.mark.django_db


def issue(username: str) -> str:
    out = io.StringIO()
    call_command("issue_token", username, stdout=out)
    return out.getvalue().strip()


def test_issue_token_prints_a_token_and_stores_only_its_hash(e17):
    raw = issue("e17")

    token = ApiToken.objects.get(user=e17)
    assert raw.startswith("ak_") and len(raw) > 30
    assert token.digest == ApiToken.hash(raw) and raw not in (token.digest, token.prefix)
    assert token_authenticate(raw=raw) == e17
    assert ApiToken.objects.get(pk=token.pk).last_used_at is not None


def test_issue_token_for_unknown_user_is_a_clear_error_and_writes_nothing(db):
    with pytest.raises(CommandError, match="No user named 'nobody'"):
        issue("nobody")
    assert ApiToken.objects.count() == 0


def test_revoked_or_unknown_tokens_do_not_authenticate(e17):
    raw = issue("e17")
    ApiToken.objects.update(revoked_at=timezone.now())

    assert token_authenticate(raw=raw) is None
    assert token_authenticate(raw="ak_not-a-token") is None


def test_inactive_users_tokens_do_not_authenticate(e17):
    raw = issue("e17")
    e17.is_active = False
    e17.save()

    assert token_authenticate(raw=raw) is None


def test_revoking_in_the_admin_is_audited_and_stops_the_token(admin_user, e17):
    from django.contrib.admin.models import LogEntry
    from django.test import Client

    raw = issue("e17")
    token = ApiToken.objects.get()
    client = Client()
    client.force_login(admin_user)

    response = client.post(
        "/admin/accounts/apitoken/",
        {"action": "revoke", "_selected_action": [token.pk]},
    )

    assert response.status_code == 302
    assert token_authenticate(raw=raw) is None
    entry = LogEntry.objects.get(object_id=str(token.pk))
    assert entry.user == admin_user and entry.change_message == "Revoked"
