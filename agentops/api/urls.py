from __future__ import annotations

from django.urls import path

from agentops.api import views as api

app_name = "agentops"
urlpatterns = [
    path("api/openapi.json", api.openapi, name="api-openapi"),
    path("api/tools", api.tools_list, name="api-tools"),
    path("api/tools/<str:name>", api.tool_call, name="api-tool-call"),
    path("api/runs", api.runs_create, name="api-runs"),
    path("api/runs/<uuid:run_id>", api.runs_detail, name="api-run"),
]
