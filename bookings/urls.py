from __future__ import annotations

from django.urls import path

from bookings import calendar_views, checkin_views, series_views, views

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
    path("series/new/", series_views.series_new, name="series_new"),
    path("series/book/", series_views.series_book, name="series_book"),
    path("series/<int:series_id>/", series_views.series_detail, name="series_detail"),
    path("series/<int:series_id>/cancel/", series_views.series_cancel, name="series_cancel"),
    path("calendar/", calendar_views.settings_section, name="calendar"),
    path("calendar/reset/", calendar_views.reset, name="calendar_reset"),
    path("calendar/feed/<str:token>.ics", calendar_views.feed, name="feed"),
    path("bookings/<str:code>/calendar.ics", calendar_views.booking_ics, name="booking_ics"),
    path("bookings/<str:code>/check-in/", checkin_views.check_in, name="check_in"),
]
