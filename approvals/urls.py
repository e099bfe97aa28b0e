from __future__ import annotations

from django.urls import path

from approvals import views

app_name = "approvals"
urlpatterns = [
    path("approvals/", views.inbox, name="inbox"),
    path("approvals/<uuid:request_id>/", views.detail, name="detail"),
    path("approvals/<uuid:request_id>/decide/", views.decide, name="decide"),
    path("approvals/<uuid:request_id>/refresh/", views.refresh, name="refresh"),
]
