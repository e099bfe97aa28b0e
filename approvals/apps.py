from __future__ import annotations

from django.apps import AppConfig
from django.utils.translation import gettext_lazy


class ApprovalsConfig(AppConfig):
    name = "approvals"
    verbose_name = gettext_lazy("Approvals")
