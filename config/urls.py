from __future__ import annotations

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path

from accounts.views import ThrottledLoginView
from agentops.mcp.metadata import protected_resource_metadata

urlpatterns = [
    path("admin/", admin.site.urls),
    path("i18n/", include("django.conf.urls.i18n")),  # set_language: the switcher posts here
    path("login/", ThrottledLoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    # RFC 9728: the metadata of /mcp, at the well-known path and at the path with its suffix.
    path(".well-known/oauth-protected-resource", protected_resource_metadata),
    path(".well-known/oauth-protected-resource/mcp", protected_resource_metadata),
    path("", include("bookings.urls")),
    path("", include("agentops.api.urls")),
    path("", include("console.urls")),
    path("", include("approvals.urls")),
    path("", include("console.operators.urls")),
    path("", include("console.ops.urls")),  # audit log, run detail, drills (admins)
]
