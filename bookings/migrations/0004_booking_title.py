from __future__ import annotations

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("bookings", "0003_audit_room_sandbox")]

    operations = [
        migrations.AddField(
            model_name="booking",
            name="title",
            field=models.CharField(
                blank=True,
                db_default="",
                help_text="Meeting title. Untrusted text: shown to its owner and approvers, escaped.",
                max_length=120,
            ),
        ),
    ]
