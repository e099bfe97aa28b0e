from __future__ import annotations

from django.urls import path

from console.operators import views

app_name = "operators"
urlpatterns = [
    path("operators/queue/", views.queue, name="queue"),
    path("nav/counts/", views.nav_counts, name="nav-counts"),
    path("operators/queue/<uuid:action_id>/decide/", views.decide, name="decide"),
    path(
        "operators/queue/runs/<uuid:run_id>/rollback/", views.rollback_retry, name="rollback_retry"
    ),
]
