"""Telling a person what happened to their booking or request: live (their My bookings page,
over the Channels layer, after commit) and by e-mail (Django's mail framework: the console
backend unless SMTP is configured). Both are sent after the caller's commit; the database
stays the record, so a lost push costs freshness only."""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from django.conf import settings
from django.core.mail import send_mail
from django.db import transaction
from django.utils import translation
from django.utils.translation import gettext, gettext_noop

from accounts.models import User
from agentops.contract import broadcast


class Notice(StrEnum):
    APPROVED = "approved"
    REJECTED = "rejected"
    EXPIRED = "expired"
    OVERTAKEN = "overtaken"  # a waiting request that can no longer run as asked
    FAILED_AFTER_APPROVAL = "failed_after_approval"
    RELEASED = "released"
    BOOKED = "booked"  # a live refresh only: the person just did it themselves
    REQUESTED = "requested"  # a live refresh only: their request waits for an approver


# (subject, body) msgids; the body's %(what)s names the booking or request in the reader's words.
_MAIL = {
    Notice.APPROVED: (
        gettext_noop("Approved: %(what)s"),
        gettext_noop("An approver approved your request: %(what)s. %(reason)s"),
    ),
    Notice.REJECTED: (
        gettext_noop("Not approved: %(what)s"),
        gettext_noop("An approver rejected your request: %(what)s. Reason: %(reason)s"),
    ),
    Notice.EXPIRED: (
        gettext_noop("No decision in time: %(what)s"),
        gettext_noop("Nobody decided on your request in time: %(what)s. Nothing was booked."),
    ),
    Notice.OVERTAKEN: (
        gettext_noop("No longer possible: %(what)s"),
        gettext_noop(
            "Your request can no longer be done as asked: %(what)s. %(reason)s "
            "Nothing was booked; the request is closed."
        ),
    ),
    Notice.FAILED_AFTER_APPROVAL: (
        gettext_noop("Approved, but not booked: %(what)s"),
        gettext_noop(
            "Your request was approved, but it could not be carried out: %(what)s. "
            "Nothing was booked. %(reason)s"
        ),
    ),
    Notice.RELEASED: (
        gettext_noop("Released: %(what)s"),
        gettext_noop("Nobody checked in to %(what)s in time, so the room was released for others."),
    ),
}


def user_group(user_id: Any) -> str:
    return f"bookings.user.{user_id}"


def push_changed(*, user_id: Any, notice: Notice) -> None:
    """After the caller's commit, poke the person's open My bookings pages (no query: safe on
    any thread, even one whose database session has already gone back to the pool)."""

    def push() -> None:  # sent by the runtime's one pushing thread: never blocks the caller
        broadcast(user_group(user_id), {"type": "bookings.changed", "notice": notice.value})

    transaction.on_commit(push, robust=True)


def notify(*, user: User, notice: Notice, what: str = "", reason: str = "") -> None:
    """After the caller's commit: poke the person's open My bookings pages, and for a decision
    send them an e-mail (when they have an address)."""
    push_changed(user_id=user.pk, notice=notice)
    if notice in _MAIL and user.email:
        subject_id, body_id = _MAIL[notice]
        with translation.override(settings.LANGUAGE_CODE):
            params = {"what": what, "reason": reason}
            subject, body = gettext(subject_id) % params, gettext(body_id) % params
        transaction.on_commit(
            lambda: send_mail(subject, body.strip(), None, [user.email]), robust=True
        )
