"""How an intent's arguments read in the inbox: in the tool's order, under their titles, in the
approver's language; an argument without a title keeps its name."""

from __future__ import annotations

from django.utils import translation

from approvals.templatetags.approvals_format import intent_fields

INTENT = {
    "params": {"end_at": "e", "room_id": "R16", "start_at": "s", "extra": 1},
    "labels": [["room_id", "Room"], ["start_at", "Start"], ["end_at", "End"]],
}


def test_arguments_follow_the_tools_order_under_their_titles():
    with translation.override("en"):
        assert intent_fields(INTENT) == [
            ("Room", "R16"),
            ("Start", "s"),
            ("End", "e"),
            ("extra", 1),
        ]


def test_an_approver_reading_chinese_sees_chinese_titles():
    with translation.override("zh-hans"):
        labels = [label for label, _value in intent_fields(INTENT)]
    assert labels[:3] == ["会议室", "开始", "结束"]


def test_a_snapshot_without_titles_shows_the_argument_names():
    assert intent_fields({"params": {"room_id": "R16"}}) == [("room_id", "R16")]
