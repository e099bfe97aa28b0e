from __future__ import annotations

import django.contrib.postgres.fields.ranges
import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("bookings", "0004_booking_title"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name="BookingChange",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("idempotency_key", models.CharField(max_length=200, unique=True)),
                ("from_during", django.contrib.postgres.fields.ranges.DateTimeRangeField()),
                ("from_attendees", models.PositiveSmallIntegerField()),
                ("from_title", models.CharField(blank=True, max_length=120)),
                ("to_during", django.contrib.postgres.fields.ranges.DateTimeRangeField()),
                ("to_attendees", models.PositiveSmallIntegerField()),
                ("to_title", models.CharField(blank=True, max_length=120)),
                ("run_id", models.CharField(blank=True, max_length=64)),
                ("action_id", models.CharField(blank=True, max_length=64)),
                ("created_at", models.DateTimeField(auto_now_add=True)),
                ("booking", models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name="changes", to="bookings.booking")),
                ("changed_by", models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name="+", to=settings.AUTH_USER_MODEL)),
                ("from_room", models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name="+", to="bookings.room")),
                ("to_room", models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name="+", to="bookings.room")),
            ],
            options={"ordering": ["-created_at"]},
        ),
    ]
