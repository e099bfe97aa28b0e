"""Identity: the user model, its department, roles (groups) and API tokens.

Below every other app of ours: any app may import this one, this one imports none of them.
"""

from __future__ import annotations

import hashlib
import secrets

from django.conf import settings
from django.contrib.auth.models import AbstractUser
from django.db import models
from django.utils.translation import gettext_lazy


class Department(models.TextChoices):
    ENGINEERING = "Engineering", gettext_lazy("Engineering")
    SALES = "Sales", gettext_lazy("Sales")


class Role(models.TextChoices):
    """Roles are Django groups of these names; read them with `selectors.user_roles`."""

    EMPLOYEE = "employees"
    APPROVER = "approvers"
    ADMIN = "admins"


class User(AbstractUser):
    employee_id = models.CharField(max_length=16, unique=True, null=True, blank=True)
    department = models.CharField(max_length=32, choices=Department.choices, blank=True)

    def __str__(self) -> str:
        return f"{self.username} ({self.employee_id})" if self.employee_id else self.username


class ApiToken(models.Model):
    """A bearer token for the JSON API. Only its SHA-256 is stored."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens"
    )
    name = models.CharField(max_length=100, blank=True)
    prefix = models.CharField(max_length=12, help_text="First characters, to recognise a token.")
    digest = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.prefix}… ({self.user})"

    @staticmethod
    def hash(raw: str) -> str:
        return hashlib.sha256(raw.encode()).hexdigest()

    @staticmethod
    def generate() -> str:
        return "ak_" + secrets.token_urlsafe(32)
