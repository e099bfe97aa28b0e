from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from accounts.models import User
from accounts.services import token_issue


class Command(BaseCommand):
    help = (
        "Print a new API bearer token for a user (only its hash is stored; the issue is audited)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username")
        parser.add_argument("--name", default="cli", help="a label for the token")
        parser.add_argument(
            "--by", default="", help="who issues it, for the audit log (default: the user)"
        )

    def handle(self, *args: Any, username: str, name: str, by: str, **options: Any) -> None:
        user = User.objects.filter(username=username).first()
        if user is None:
            raise CommandError(f"No user named {username!r}.")
        actor = User.objects.filter(username=by).first() if by else user
        if actor is None:
            raise CommandError(f"No user named {by!r}.")
        self.stdout.write(token_issue(user=user, name=name, actor=actor))
