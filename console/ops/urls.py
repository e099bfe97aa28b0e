"""The admins' screens of the runtime: audit log, run detail, drills (namespace ``ops``)."""

from __future__ import annotations

from django.urls import path

from console.ops import drills as drill_views
from console.ops import views as audit_views

app_name = "ops"
urlpatterns = [
    path("ops/audit/", audit_views.audit_log, name="audit"),
    path("ops/audit/export", audit_views.audit_export, name="audit-export"),
    path("ops/runs/<str:run_id>/", audit_views.run_detail, name="run"),
    path("ops/drills/", drill_views.drills, name="drills"),
    path("ops/drills/start", drill_views.drill_start_view, name="drill-start"),
    path("ops/drills/<str:drill_id>/", drill_views.drill_detail, name="drill"),
]
