from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from accounts import throttle
from accounts.models import AuditAction, User
from accounts.services import audit_record, login_unlock_by


class Command(BaseCommand):
    help = "Lift the sign-in lock of an account (or of a client address), audited as --by's act."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username", nargs="?", default="")
        parser.add_argument("--address", default="", help="a client address to unlock too")
        parser.add_argument("--by", required=True, help="the admin who unlocks, for the audit log")

    def handle(self, *args: Any, username: str, address: str, by: str, **options: Any) -> None:
        actor = User.objects.filter(username=by, is_superuser=True).first()
        if actor is None:
            raise CommandError(f"No superuser named {by!r}.")
        if not (username or address):
            raise CommandError("Name an account, an --address, or both.")
        if username:
            user = User.objects.filter(username=username).first()
            if user is None:
                raise CommandError(f"No user named {username!r}.")
            login_unlock_by(actor=actor, user=user)
        if address:
            throttle.login_unlock(address=address)
            audit_record(
                actor=actor,
                action=AuditAction.LOGIN_UNLOCKED,
                target=f"address:{address}",
                detail={"address": address},
            )
        self.stdout.write("Unlocked.")
