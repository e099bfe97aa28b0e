"""Django's createsuperuser, with the password validators on every path: the interactive prompt
offers no bypass, and a password given by DJANGO_SUPERUSER_PASSWORD (with --noinput) is
validated too (Django creates that one unchecked)."""

from __future__ import annotations

import builtins
import os
from typing import Any

from django.contrib.auth.management.commands import createsuperuser
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError
from django.core.management.base import CommandError

BYPASS_PROMPT = "Bypass password validation"


def _no_bypass(prompt: str = "") -> str:
    if prompt.startswith(BYPASS_PROMPT):
        return "n"  # asked again: the validators are not optional
    return builtins.input(prompt)


class Command(createsuperuser.Command):
    def handle(self, *args: Any, **options: Any) -> None:
        if not options["interactive"]:
            # Django's own variable for this command, read where Django reads it.
            password = os.environ.get("DJANGO_SUPERUSER_PASSWORD")
            if password is not None:
                username = options.get(self.UserModel.USERNAME_FIELD) or os.environ.get(
                    f"DJANGO_SUPERUSER_{self.UserModel.USERNAME_FIELD.upper()}", ""
                )
                try:
                    validate_password(
                        password, self.UserModel(**{self.UserModel.USERNAME_FIELD: username})
                    )
                except ValidationError as err:
                    raise CommandError(" ".join(err.messages)) from err
            return super().handle(*args, **options)
        # The bypass question is asked with the builtin input() from createsuperuser's module;
        # a module-level name of the same module is found first.
        createsuperuser.input = _no_bypass
        try:
            return super().handle(*args, **options)
        finally:
            del createsuperuser.input
