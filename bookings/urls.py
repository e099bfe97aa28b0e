from __future__ import annotations

from django.urls import path

from bookings import views

app_name = "bookings"
urlpatterns = [
    path("", views.search, name="search"),
    path("book/", views.book, name="book"),
    path("bookings/", views.mine, name="mine"),
    path("bookings/<str:code>/cancel/", views.cancel, name="cancel"),
    path("requests/<uuid:request_id>/withdraw/", views.withdraw, name="withdraw"),
]
