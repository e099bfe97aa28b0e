from __future__ import annotations

from django.apps import AppConfig
from django.utils.translation import gettext_lazy


class ConsoleConfig(AppConfig):
    """The screens for people over the engine's front door: the assistant, run detail, audit
    log, drills and the reconciliation queue. The engine never imports this app."""

    name = "console"
    verbose_name = gettext_lazy("Console")
