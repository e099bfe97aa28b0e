"""The site's sign-in page, throttled: a refusal of the throttle answers 429 (locked) or 503
(busy) with Retry-After, the form shown again with why."""

from __future__ import annotations

from django.contrib.auth.forms import AuthenticationForm
from django.contrib.auth.views import LoginView
from django.http import HttpResponse

from accounts.forms import ThrottledAuthenticationForm, ThrottledLogin


def throttled_status(response: HttpResponse) -> HttpResponse:
    """Give a sign-in page whose form the throttle refused its status and Retry-After."""
    form = (getattr(response, "context_data", None) or {}).get("form")
    if isinstance(form, ThrottledLogin) and form.retry_after_s:
        response.status_code = form.status
        response["Retry-After"] = str(form.retry_after_s)
    return response


class ThrottledLoginView(LoginView):
    form_class = ThrottledAuthenticationForm

    def form_invalid(self, form: AuthenticationForm) -> HttpResponse:
        return throttled_status(super().form_invalid(form))
