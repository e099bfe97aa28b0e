from __future__ import annotations

from django.urls import path

from console import views

app_name = "assistant"
urlpatterns = [
    path("assistant/", views.assistant, name="assistant"),
    path("assistant/runs/", views.start, name="start"),
    path("assistant/runs/<uuid:run_id>/", views.run_page, name="run"),
]
