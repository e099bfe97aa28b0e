"""The Django admin speaks its reader's language: app and model names are translated."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

pytestmark = pytest.mark.django_db


def test_a_chinese_admin_reads_app_and_model_names_in_chinese(admin_user):
    client = Client(headers={"accept-language": "zh-hans"})
    client.force_login(admin_user)
    html = client.get(reverse("admin:index")).content.decode()
    for words in ("审批", "审批申请", "预订", "会议室", "智能体运行时", "工具调用", "账户"):
        assert words in html, words
    for english in ("Approval requests", "Agent runtime", "Trace events", "Rooms"):
        assert english not in html, english
