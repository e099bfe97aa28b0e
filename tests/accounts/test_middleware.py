"""A signed-out htmx request is sent to the login page with HX-Redirect, never given the login
page as a fragment; ordinary requests keep the plain redirect."""

from __future__ import annotations

import pytest
from django.urls import reverse

pytestmark = pytest.mark.django_db

HTMX = {"HTTP_HX_REQUEST": "true"}


def test_a_signed_out_htmx_request_gets_hx_redirect_to_the_login_with_the_page_as_next(client):
    response = client.get(
        reverse("bookings:search") + "?date=2026-12-01",
        HTTP_HX_CURRENT_URL="http://testserver/bookings/?x=1",
        **HTMX,
    )

    assert response.status_code == 200
    assert response["HX-Redirect"] == "/login/?next=/bookings/%3Fx%3D1"
    assert response.content == b""


def test_without_a_current_url_next_is_the_requested_url(client):
    response = client.post(reverse("bookings:book"), {}, **HTMX)

    assert response.status_code == 200
    assert response["HX-Redirect"] == "/login/?next=/book/"


def test_a_signed_out_plain_request_keeps_the_redirect(client):
    response = client.get(reverse("bookings:mine"))

    assert response.status_code == 302
    assert response["Location"] == "/login/?next=/bookings/"
    assert "HX-Redirect" not in response


def test_a_signed_in_htmx_request_is_untouched(client, e17):
    client.force_login(e17)
    response = client.get(reverse("bookings:search"), **HTMX)

    assert response.status_code == 200
    assert "HX-Redirect" not in response
