from __future__ import annotations

from django.apps import AppConfig
from django.conf import settings
from django.utils.translation import gettext_lazy


class AgentopsConfig(AppConfig):
    name = "agentops"
    verbose_name = gettext_lazy("Agent runtime")

    def ready(self) -> None:
        from agentops import selectors
        from agentops.contract import install_broadcaster, install_governor
        from agentops.runtime import approval, registry, trace
        from agentops.runtime.direct import tool_call_governed
        from approvals.hooks import hooks_install
        from approvals.signals import approval_refresh_requested, approval_settled

        registry.autodiscover()
        if settings.MCP_GATEWAY_SERVERS:  # third-party MCP tools join the registry
            from agentops.mcp.gateway import gateway_register

            gateway_register()
        install_governor(tool_call_governed)
        install_broadcaster(trace.broadcast, listen=trace.watch, unlisten=trace.unwatch)
        approval_settled.connect(approval.on_settled, dispatch_uid="agentops.approval_settled")
        approval_refresh_requested.connect(
            approval.on_refresh, dispatch_uid="agentops.approval_refresh"
        )
        # The approvers' present and outcomes, read through the door (approvals imports no
        # runtime: it calls what is installed here).
        hooks_install(
            recheck=selectors.approval_recheck,
            outcomes=selectors.approval_outcomes,
            broadcast=trace.broadcast,
            listen=trace.watch,
            unlisten=trace.unwatch,
        )
