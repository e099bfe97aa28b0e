"""Simplified Chinese date formats of the screens; Django's `zh_Hans` module supplies every
format not named here."""

DATE_FORMAT = "Y年n月j日 D"  # 2026年9月28日 星期一
TIME_FORMAT = "H:i"  # 14:00
SHORT_DATETIME_FORMAT = "n月j日 H:i"  # 9月28日 14:00
