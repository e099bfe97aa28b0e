"""Django's createsuperuser, with the password validators on every path: the interactive prompt
offers no bypass, and a password given by DJANGO_SUPERUSER_PASSWORD (with --noinput) is
validated too (Django creates that one unchecked)."""

from __future__ import annotations

import builtins
import os
from typing import Any, cast

from django.contrib.auth.management.commands import createsuperuser
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError
from django.core.management.base import CommandError

from accounts.models import User

BYPASS_PROMPT = "Bypass password validation"


def _no_bypass(prompt: str = "") -> str:
    if prompt.startswith(BYPASS_PROMPT):
        return "n"  # asked again: the validators are not optional
    return builtins.input(prompt)


class Command(createsuperuser.Command):
    def handle(self, *args: Any, **options: Any) -> str | None:
        # Django sets UserModel to get_user_model(), which is accounts.User (AUTH_USER_MODEL);
        # the stubs can only say AbstractBaseUser.
        user_model = cast("type[User]", self.UserModel)
        if not options["interactive"]:
            # Django's own variable for this command, read where Django reads it.
            password = os.environ.get("DJANGO_SUPERUSER_PASSWORD")
            if password is not None:
                username = options.get(user_model.USERNAME_FIELD) or os.environ.get(
                    f"DJANGO_SUPERUSER_{user_model.USERNAME_FIELD.upper()}", ""
                )
                try:
                    validate_password(password, user_model(**{user_model.USERNAME_FIELD: username}))
                except ValidationError as err:
                    raise CommandError(" ".join(err.messages)) from err
            return super().handle(*args, **options)
        # The bypass question is asked with the builtin input() from createsuperuser's module;
        # a module-level name of the same module is found first. setattr/delattr: the module
        # has no such attribute until this sets one.
        setattr(createsuperuser, "input", _no_bypass)  # noqa: B010
        try:
            return super().handle(*args, **options)
        finally:
            delattr(createsuperuser, "input")
