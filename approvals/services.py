"""Approval writes: open a request, decide it (signed), verify and consume it at execution,
expire and withdraw. Every human action and every refusal leaves an audit row."""

from __future__ import annotations

import secrets
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.core.mail import EmailMessage, mailers
from django.db import connection, transaction
from django.utils import timezone
from django.utils.translation import gettext, gettext_noop, ngettext

from accounts.models import AuditAction, Role, User
from accounts.selectors import approver_addresses, user_roles
from accounts.services import audit_record
from accounts.typed import TypedField, UncleanText, typed_text
from accounts.words import say
from approvals import hooks, signing
from approvals.live import inbox_poke
from approvals.models import (
    ApprovalAudit,
    ApprovalRecord,
    ApprovalRequest,
    AuditEvent,
    Decision,
    RequestStatus,
)
from approvals.selectors import approval_request_approved
from approvals.signals import approval_opened, approval_refresh_requested, approval_settled

MAX_REASON = 500


@dataclass(frozen=True)
class Result:
    ok: bool
    code: str = ""
    message: str = ""  # in the active language (the reader's: services run in their request)
    problems: list[dict[str, Any]] = field(default_factory=list)  # stored messages


def _audit(
    event: AuditEvent,
    *,
    request: ApprovalRequest | None = None,
    actor: User | None = None,
    code: str = "",
    **detail: Any,
) -> None:
    ApprovalAudit.objects.create(
        request=request, actor=actor, event=event, code=code, detail=detail
    )


def _human(action: AuditAction, *, request: ApprovalRequest, actor: User, **detail: Any) -> None:
    """The product-wide audit row of a human decision (accounts' log), beside this app's own."""
    audit_record(
        actor=actor,
        action=action,
        target=f"action:{request.action_ref}",
        run_id=_run_uuid(request.run_ref),
        detail={"request": str(request.pk), **detail},
    )


def _run_uuid(run_ref: str) -> uuid.UUID | None:
    try:
        return uuid.UUID(run_ref)
    except (TypeError, ValueError):
        return None


def _announce(request: ApprovalRequest) -> None:
    transaction.on_commit(lambda: approval_settled.send(sender=ApprovalRequest, request=request))
    inbox_poke()


@transaction.atomic(savepoint=False)  # the runtime's transaction, as it is
def approval_request_open(
    *,
    action_ref: str,
    run_ref: str,
    requester: User,
    binding: dict[str, Any],
    intent: dict[str, Any],
    deadline: datetime,
    new_action: bool = False,
) -> ApprovalRequest:
    """Open the request for one action (again, if it was opened before: the same one).
    ``new_action``: the caller recorded the action in this transaction, so no request of it
    can be open (the look for one is spared)."""
    if not new_action:
        existing = ApprovalRequest.objects.filter(
            action_ref=action_ref, status=RequestStatus.PENDING
        ).first()
        if existing is not None:
            return existing
    request = ApprovalRequest.objects.create(
        action_ref=action_ref,
        run_ref=run_ref,
        requester=requester,
        binding=binding,
        intent=intent,
        deadline=deadline,
    )
    _audit(AuditEvent.REQUESTED, request=request, actor=requester)
    inbox_poke()
    transaction.on_commit(lambda: approval_opened.send(sender=ApprovalRequest, request=request))
    _notify_approvers(request)
    return request


def _notify_approvers(request: ApprovalRequest) -> None:
    """The approvers hear of it by mail: at once when none was mailed within the window,
    else with the others of the window at its end (approvals.mail)."""
    transaction.on_commit(approvers_mail_send, robust=True)


# --- how many requests one person may open (approvers cannot be flooded) --------------------


@dataclass(frozen=True)
class Bound:
    """A bound a new request would pass: English msgids and their parameters (the runtime's
    envelope carries them for the reader's language), and when to ask again, if known."""

    code: str
    msgid: str
    hint: str
    params: dict[str, Any]
    retry_after_ms: int | None = None


def approval_request_bound(*, requester_id: int, now: datetime | None = None) -> Bound | None:
    """The bound one more approval request of ``requester_id`` would pass now, or None:
    APPROVAL_PENDING_PER_REQUESTER waiting at once, APPROVAL_REQUESTS_PER_HOUR opened in the
    last hour. Call it in the transaction that would open the request: it takes the
    requester's lock until that transaction ends, so one person's concurrent calls are counted
    one after another (two cannot both take the last place)."""
    now = now or timezone.now()
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))",
            [f"approvals:requester:{requester_id}"],
        )
    mine = ApprovalRequest.objects.filter(requester_id=requester_id)
    waiting = mine.filter(status=RequestStatus.PENDING).count()
    if waiting >= settings.APPROVAL_PENDING_PER_REQUESTER:
        return Bound(
            "too_many_pending_approvals",
            gettext_noop(
                "You already have %(count)d requests waiting for an approver, the most one "
                "person may have at once."
            ),
            gettext_noop("Wait until an approver decides one, or withdraw one in My bookings."),
            {"count": waiting},
        )
    hour = timedelta(hours=1)
    opened = list(
        mine.filter(created_at__gt=now - hour)
        .order_by("-created_at")
        .values_list("created_at", flat=True)[: settings.APPROVAL_REQUESTS_PER_HOUR]
    )
    if len(opened) < settings.APPROVAL_REQUESTS_PER_HOUR:
        return None
    free_at = opened[-1] + hour  # the oldest of the last hour's leaves it
    retry_after_ms = max(1000, int((free_at - now).total_seconds() * 1000))
    return Bound(
        "too_many_approvals_this_hour",
        gettext_noop(
            "You asked for %(count)d approvals in the last hour, the most one person may ask "
            "for in an hour."
        ),
        gettext_noop("Ask again in %(minutes)d min."),
        {"count": len(opened), "minutes": -(-retry_after_ms // 60_000)},
        retry_after_ms,
    )


# --- the approvers' mail: one per approver per window, listing the window's new requests -----


def approvers_mail_send(*, now: datetime | None = None) -> int:
    """Mail the approvers the pending requests not mailed yet, one mail per approver listing
    those not their own, unless a mail went out less than APPROVAL_MAIL_WINDOW_SECONDS ago
    (then the beat task sends them at the window's end). One sender at a time; each request
    is mailed once. How many requests were mailed."""
    now = now or timezone.now()
    window = timedelta(seconds=settings.APPROVAL_MAIL_WINDOW_SECONDS)
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", ["approvals:mail"]
            )
        last = (
            ApprovalRequest.objects.filter(mailed_at__isnull=False)
            .order_by("-mailed_at")
            .values_list("mailed_at", flat=True)
            .first()
        )
        if last is not None and now - last < window:
            return 0
        due = list(
            ApprovalRequest.objects.filter(mailed_at__isnull=True, status=RequestStatus.PENDING)
            .select_related("requester")
            .order_by("created_at")
        )
        if not due:
            return 0
        ApprovalRequest.objects.filter(pk__in=[r.pk for r in due]).update(mailed_at=now)
        mails = []
        for approver_id, address in approver_addresses():
            theirs = [r for r in due if r.requester_id != approver_id]
            if theirs:
                mails.append(_approver_mail(theirs, address))
        transaction.on_commit(lambda: mailers.default.send_messages(mails), robust=True)
    return len(due)


def _approver_mail(requests: list[ApprovalRequest], address: str) -> EmailMessage:
    if len(requests) == 1:
        intent = requests[0].intent
        subject = gettext("Approval needed: %(what)s for %(who)s") % _who_what(intent)
    else:
        subject = ngettext(
            "%(count)d approval needed", "%(count)d approvals needed", len(requests)
        ) % {"count": len(requests)}
    body = "\n\n".join(_request_lines(r) for r in requests)
    return EmailMessage(subject, body, None, [address])


def _who_what(intent: dict[str, Any]) -> dict[str, str]:
    return {
        "who": intent.get("requester_name") or intent.get("subject", ""),
        "what": say(intent.get("summary")) or intent.get("tool", ""),
    }


def _request_lines(request: ApprovalRequest) -> str:
    intent = request.intent
    return "\n".join(
        [
            gettext("%(who)s asks for: %(what)s (%(channel)s)")
            % {**_who_what(intent), "channel": say(intent.get("channel"))},
            gettext("Why it needs approval: %(reasons)s")
            % {"reasons": say(intent.get("risk_reasons") or [])},
            gettext("Decide before %(deadline)s in the approvals inbox.")
            % {"deadline": f"{timezone.localtime(request.deadline):%Y-%m-%d %H:%M %Z}"},
        ]
    )


def approval_decide(*, request_id: Any, approver: User, approve: bool, reason: str) -> Result:
    """Approve or reject a pending request. Only an approver who is not the requester, before
    the deadline, with a reason; one decision per request however many arrive at once."""
    unclean: Result | None = None
    try:
        reason = typed_text(reason or "", TypedField.REASON).strip()[:MAX_REASON]
    except UncleanText as exc:  # a reason is read by others: typed as it will be read
        unclean, reason = Result(False, exc.code, exc.display), ""
    with transaction.atomic():
        request = ApprovalRequest.objects.select_for_update().filter(pk=request_id).first()
        if request is None:
            _audit(AuditEvent.REFUSED, actor=approver, code="not_found")
            return Result(False, "not_found", gettext("There is no such approval request."))
        refusal = _refusal(request, approver, reason, unclean) or (
            _cannot_succeed(request) if approve else None
        )
        if refusal is not None:
            _audit(
                AuditEvent.REFUSED,
                request=request,
                actor=approver,
                code=refusal.code,
                **({"problems": refusal.problems} if refusal.problems else {}),
            )
            return refusal
        now = timezone.now()
        decision = Decision.APPROVE if approve else Decision.REJECT
        expires_at = min(request.deadline, now + timedelta(minutes=settings.APPROVAL_VALID_MINUTES))
        nonce = secrets.token_hex(16)
        payload = {
            "binding": request.binding,
            "decision": decision.value,
            "approver": approver.pk,
            "nonce": nonce,
            "expires_at": expires_at.isoformat(),
        }
        key_id, signature = signing.sign(payload)
        ApprovalRecord.objects.create(
            request=request,
            decision=decision,
            approver=approver,
            reason=reason,
            payload=payload,
            key_id=key_id,
            signature=signature,
            nonce=nonce,
            expires_at=expires_at,
        )
        request.status = RequestStatus.APPROVED if approve else RequestStatus.REJECTED
        request.decided_at = now
        request.save(update_fields=["status", "decided_at"])
        event = AuditEvent.APPROVED if approve else AuditEvent.REJECTED
        _audit(event, request=request, actor=approver, reason=reason)
        _human(
            AuditAction.APPROVAL_APPROVED if approve else AuditAction.APPROVAL_REJECTED,
            request=request,
            actor=approver,
            reason=reason,
        )
        _announce(request)
    return Result(True)


def _refusal(
    request: ApprovalRequest, approver: User, reason: str, unclean: Result | None = None
) -> Result | None:
    if Role.APPROVER not in user_roles(user=approver):
        return Result(False, "not_an_approver", gettext("Only approvers decide approval requests."))
    if request.requester_id == approver.pk:
        return Result(False, "self_approval", gettext("Nobody approves their own request."))
    if request.status != RequestStatus.PENDING:
        return Result(
            False,
            "already_decided",
            gettext("This request is already decided (%(status)s).")
            % {"status": request.get_status_display()},
        )
    if timezone.now() >= request.deadline:
        return Result(False, "expired", gettext("This request's deadline has passed."))
    if unclean is not None:
        return unclean
    if not reason:
        return Result(False, "reason_required", gettext("Give a reason for the decision."))
    return None


CANNOT_SUCCEED = gettext_noop(
    "It cannot be approved: %(problems)s Reject it with a reason instead."
)


def _cannot_succeed(request: ApprovalRequest) -> Result | None:
    """An approval the write could no longer honour is refused: nothing is signed."""
    problems = hooks.request_recheck(request)
    if not problems:
        return None
    message = gettext(CANNOT_SUCCEED) % {"problems": " ".join(say(p) for p in problems)}
    return Result(False, "cannot_succeed", message, problems)


def approval_verify_and_consume(*, action_ref: str, binding_now: dict[str, Any]) -> Result:
    """Right before a high-risk action runs: is there a signed approval of exactly this intent,
    against this state, still valid? Consume its nonce (once; the same action may retry).
    A record that fails stays as evidence. Call inside the runtime's transaction."""
    request = approval_request_approved(action_ref=action_ref)
    if request is None:
        return Result(False, "approval_missing", "This action has no approval.")
    record = request.record
    result = _check(record, binding_now)
    if result.ok and nonce_consume(record.nonce, action_ref) != action_ref:
        result = Result(False, "nonce_replayed", "This approval was already used.")
    _audit(
        AuditEvent.CONSUMED if result.ok else AuditEvent.NOT_VALID,
        request=request,
        code=result.code,
    )
    if result.code in STALE_CODES:
        ApprovalRequest.objects.filter(pk=request.pk).update(status=RequestStatus.STALE)
        inbox_poke()
    return result


# Hand-written: the consumption of a nonce in one statement where the ORM took four (a read,
# then the insert in a savepoint, for the unique violation of a race). A nonce already used
# keeps its row: the statement inserts nothing and returns nothing.
NONCE_CONSUME_SQL = """
INSERT INTO approvals_nonceuse (nonce, action_ref, used_at) VALUES (%s, %s, %s)
ON CONFLICT (nonce) DO NOTHING
RETURNING action_ref
"""
NONCE_USER_SQL = "SELECT action_ref FROM approvals_nonceuse WHERE nonce = %s"


def nonce_consume(nonce: str, action_ref: str) -> str:
    """Consume ``nonce`` for ``action_ref``: the action it is used by from now on (``action_ref``
    when it was free or already this action's; another's: a replay). A concurrent consumer's
    insert makes this one wait for its commit; its row is then read in a statement of its own,
    which sees that commit."""
    with connection.cursor() as cursor:
        cursor.execute(NONCE_CONSUME_SQL, [nonce, action_ref, timezone.now()])
        row = cursor.fetchone()
        if row is None:
            cursor.execute(NONCE_USER_SQL, [nonce])
            row = cursor.fetchone()
    # Never empty: the conflicting row is committed. Were it, the approval would not run.
    return str(row[0]) if row is not None else ""


# Seed 002: a genuine approval whose time ran out is kept as evidence and the action frozen
# until a fresh approval of the exact intent against the current state; one whose binding no
# longer matches (the intent, the room's facts, the tool, the environment changed) is refused
# like any invalid approval: the action does not run, and the refusal is its record.
STALE_CODES = frozenset({"approval_expired"})


def approval_refresh(*, request_id: Any, approver: User) -> Result:
    """Ask for a fresh approval of a stale request's exact intent, against the current state."""
    with transaction.atomic():
        request = ApprovalRequest.objects.select_for_update().filter(pk=request_id).first()
        if request is None:
            return Result(False, "not_found", gettext("There is no such approval request."))
        if Role.APPROVER not in user_roles(user=approver):
            _audit(AuditEvent.REFUSED, request=request, actor=approver, code="not_an_approver")
            return Result(
                False, "not_an_approver", gettext("Only approvers decide approval requests.")
            )
        if (
            request.status != RequestStatus.STALE
            or ApprovalRequest.objects.filter(
                action_ref=request.action_ref, status=RequestStatus.PENDING
            ).exists()
        ):
            _audit(AuditEvent.REFUSED, request=request, actor=approver, code="not_stale")
            return Result(
                False, "not_stale", gettext("This request does not need a fresh approval.")
            )
        _audit(AuditEvent.REFRESH_REQUESTED, request=request, actor=approver)
        _human(AuditAction.APPROVAL_REFRESHED, request=request, actor=approver)
        transaction.on_commit(
            lambda: approval_refresh_requested.send(sender=ApprovalRequest, request=request)
        )
    return Result(True)


def _check(record: ApprovalRecord, binding_now: dict[str, Any]) -> Result:
    try:
        genuine = signing.verify(record.payload, key_id=record.key_id, signature=record.signature)
    except signing.UnknownKeyError:
        return Result(False, "unknown_key", "The approval is signed with an unknown key.")
    if not genuine:
        return Result(False, "bad_signature", "The approval's signature does not verify.")
    if record.payload.get("decision") != Decision.APPROVE:
        return Result(False, "not_approved", "The signed decision is not an approval.")
    if record.payload.get("nonce") != record.nonce:
        return Result(False, "bad_signature", "The approval's nonce was altered.")
    if datetime.fromisoformat(record.payload["expires_at"]) <= timezone.now():
        return Result(False, "approval_expired", "The approval has expired.")
    signed = record.payload.get("binding") or {}
    drifted = sorted(
        k for k in set(signed) | set(binding_now) if signed.get(k) != binding_now.get(k)
    )
    if drifted:
        return Result(
            False,
            "approval_drifted",
            f"The approved intent or state changed: {', '.join(drifted)}.",
        )
    return Result(True)


_CLOSE_EVENTS = {
    RequestStatus.EXPIRED: AuditEvent.EXPIRED,
    RequestStatus.OVERTAKEN: AuditEvent.OVERTAKEN,
}


def _close(
    request: ApprovalRequest, status: RequestStatus, actor: User | None, **detail: Any
) -> None:
    request.status = status
    request.decided_at = timezone.now()
    request.save(update_fields=["status", "decided_at"])
    _audit(_CLOSE_EVENTS.get(status, AuditEvent.WITHDRAWN), request=request, actor=actor, **detail)
    _announce(request)


@transaction.atomic
def approval_close(*, action_ref: str, status: RequestStatus, actor: User | None = None) -> None:
    """End an action's open requests (withdrawn because the run ended, or by the requester)."""
    for request in ApprovalRequest.objects.select_for_update().filter(
        action_ref=action_ref, status__in=[RequestStatus.PENDING, RequestStatus.STALE]
    ):
        _close(request, status, actor)


def approval_withdraw(*, request_id: Any, user: User) -> Result:
    """The requester takes a pending request back; the runtime then cancels what waited on it."""
    with transaction.atomic():
        request = ApprovalRequest.objects.select_for_update().filter(pk=request_id).first()
        if request is None or request.requester_id != user.pk:
            _audit(AuditEvent.REFUSED, request=request, actor=user, code="not_yours")
            return Result(False, "not_found", "There is no such request of yours.")
        if request.status != RequestStatus.PENDING:
            _audit(AuditEvent.REFUSED, request=request, actor=user, code="already_decided")
            return Result(False, "already_decided", f"This request is already {request.status}.")
        approval_close(action_ref=request.action_ref, status=RequestStatus.WITHDRAWN, actor=user)
        _human(AuditAction.APPROVAL_WITHDRAWN, request=request, actor=user)
    return Result(True)


def approvals_expire_due(*, now: datetime | None = None) -> int:
    """Expire every pending request past its deadline, and every stale one nobody refreshed
    in time (the sweeper calls this): the runtime then ends what waited on them."""
    now = now or timezone.now()
    open_statuses = [RequestStatus.PENDING, RequestStatus.STALE]
    due = list(
        ApprovalRequest.objects.filter(status__in=open_statuses, deadline__lte=now).values_list(
            "pk", flat=True
        )
    )
    expired = 0
    for request_id in due:
        with transaction.atomic():
            request = (
                ApprovalRequest.objects.select_for_update()
                .filter(pk=request_id, status__in=open_statuses, deadline__lte=now)
                .first()
            )
            if request is not None:
                _close(request, RequestStatus.EXPIRED, None)
                expired += 1
    return expired


OVERTAKEN_BATCH = 200


def approvals_close_overtaken(*, limit: int = OVERTAKEN_BATCH) -> int:
    """Close every pending request that can no longer run as asked (the sweeper calls this):
    its action's re-check against now finds something in its way that no decision can change
    (someone else took the slot, its time began; the same re-check that refuses an approval
    of it, ``_cannot_succeed``). Left open, it would wait for days and an approver could only
    refuse it. The runtime then ends what waited on it and its requester is told why. Oldest
    first, ``limit`` a sweep. Returns how many it closed."""
    closed = 0
    waiting = ApprovalRequest.objects.filter(status=RequestStatus.PENDING).order_by("created_at")
    for request in waiting[:limit]:
        problems = hooks.request_recheck(request)
        if not problems:
            continue
        with transaction.atomic():
            locked = (
                ApprovalRequest.objects.select_for_update()
                .filter(pk=request.pk, status=RequestStatus.PENDING)
                .first()
            )
            if locked is not None:
                _close(locked, RequestStatus.OVERTAKEN, None, problems=problems)
                closed += 1
    return closed


# What a rendered intent keeps past its run's retention: what kind of thing was asked and by
# whom, not the person's words or the call's values (the binding keeps their digest).
_INTENT_KEPT = ("tool", "labels", "subject", "department")


def approval_intents_expire(*, run_refs: list[str]) -> int:
    """Blank the rendered intents of these runs' approval requests (retention): the request
    text and the call's parameters go; the signed binding, the decision and its audit stay.
    Idempotent. Returns how many requests changed."""
    changed = 0
    # has_key, not intent__expired=True: a JSON key that is absent compares as NULL, and NOT
    # NULL would exclude every intent that was never expired.
    for request in ApprovalRequest.objects.filter(run_ref__in=run_refs).exclude(
        intent__has_key="expired"
    ):
        request.intent = {k: request.intent[k] for k in _INTENT_KEPT if k in request.intent} | {
            "expired": True
        }
        request.save(update_fields=["intent"])
        changed += 1
    return changed
