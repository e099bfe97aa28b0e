from __future__ import annotations

app_name = "agentops"
urlpatterns: list = []
