from __future__ import annotations

from django.urls import path

from bookings import views

app_name = "bookings"
urlpatterns = [
    path("", views.search, name="search"),
    path("book/", views.book, name="book"),
    path("bookings/", views.mine, name="mine"),
    path("bookings/<str:code>/cancel/", views.cancel, name="cancel"),
    path("bookings/<str:code>/change/", views.change_form, name="change_form"),
    path("bookings/<str:code>/change/save/", views.change, name="change"),
    path("day/", views.day, name="day"),
    path("day/room/<str:code>/", views.room_week, name="room_week"),
    path("day/slot/", views.day_slot, name="day_slot"),
    path("day/book/", views.day_book, name="day_book"),
    path("requests/<uuid:request_id>/withdraw/", views.withdraw, name="withdraw"),
]
