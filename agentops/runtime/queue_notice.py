"""The operators hear when something enters (or leaves) their queue: a poke to the open pages'
navigation (live count and an in-app notice) and an e-mail to every operator with an address,
both after the caller's commit. The database stays the record: a lost poke costs freshness.

The poke goes out on the one pushing thread (trace.broadcast), only to a group a page listens
to (console.live's navigation socket marks it), and never holds up the caller."""

from __future__ import annotations

from typing import Any

from django.core.mail import send_mail
from django.db import transaction
from django.db.models import Q
from django.utils.translation import gettext

from accounts.models import Role, User
from agentops.runtime.trace import broadcast

QUEUE_GROUP = "operators.queue"


def queue_poke() -> None:
    """After commit, tell the operators' open pages that the queue changed."""

    transaction.on_commit(lambda: broadcast(QUEUE_GROUP, {"type": "queue.changed"}), robust=True)


def queue_entered(*, action: Any) -> None:
    """An unclear write waits for a human: poke the pages and e-mail the operators."""
    queue_poke()
    recipients = list(
        User.objects.filter(
            Q(groups__name=Role.OPERATOR) | Q(groups__name=Role.ADMIN), is_active=True
        )
        .exclude(email="")
        .values_list("email", flat=True)
        .distinct()
    )
    if not recipients:
        return
    subject = gettext("A write needs an operator's decision")
    body = gettext(
        "A write's outcome could not be settled automatically: nobody knows yet whether it "
        "happened. Open the reconciliation queue to decide from the lookup it shows "
        "(key %(key)s)."
    ) % {"key": action.idempotency_key}
    transaction.on_commit(lambda: send_mail(subject, body, None, recipients), robust=True)
