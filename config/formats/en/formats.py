"""English date formats of the screens (24-hour times, day before month); Django's `en` module
supplies every format not named here."""

DATE_FORMAT = "D j M Y"  # Mon 28 Sep 2026
TIME_FORMAT = "H:i"  # 14:00
SHORT_DATETIME_FORMAT = "j M H:i"  # 28 Sep 14:00
