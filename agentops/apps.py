from __future__ import annotations

from django.apps import AppConfig


class AgentopsConfig(AppConfig):
    name = "agentops"
    verbose_name = "Agent runtime"

    def ready(self) -> None:
        from agentops import registry
        from agentops.runtime import approval
        from approvals.signals import approval_settled

        registry.autodiscover()
        approval_settled.connect(approval.on_settled, dispatch_uid="agentops.approval_settled")
