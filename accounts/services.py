"""Identity writes."""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from accounts.models import ApiToken, User


@transaction.atomic
def token_issue(*, user: User, name: str = "") -> str:
    """Create an API token for ``user`` and return the raw value; only its hash is kept."""
    raw = ApiToken.generate()
    ApiToken.objects.create(user=user, name=name, prefix=raw[:10], digest=ApiToken.hash(raw))
    return raw


def token_authenticate(*, raw: str) -> User | None:
    """The user of a live token, or None. Records when the token was last used."""
    token = (
        ApiToken.objects.select_related("user")
        .filter(digest=ApiToken.hash(raw), revoked_at__isnull=True, user__is_active=True)
        .first()
    )
    if token is None:
        return None
    ApiToken.objects.filter(pk=token.pk).update(last_used_at=timezone.now())
    return token.user
