from __future__ import annotations

import re
import uuid
from datetime import timedelta
from html import unescape
from pathlib import Path

import pytest
from django.conf import settings
from django.test import Client
from django.urls import reverse
from django.utils import timezone, translation

from bookings.errors import BookingError
from bookings.services import booking_reserve
from tests.conftest import slot

SEARCH = reverse("bookings:search")
BOOK = reverse("bookings:book")
MINE = reverse("bookings:mine")
SET_LANGUAGE = reverse("set_language")
HTMX = {"HTTP_HX_REQUEST": "true"}
ZH = {"HTTP_ACCEPT_LANGUAGE": "zh-hans"}
CATALOGUE = Path(settings.BASE_DIR) / "locale" / "zh_Hans" / "LC_MESSAGES" / "django.po"

# The words of the screens' chrome: none of them may be left in English on a Chinese page.
ENGLISH_CHROME = [
    "Find a room",
    "My bookings",
    "Log out",
    "Search",
    "Equipment",
    "People",
    "Seats",
    "Floor",
    "Department",
    "free",
    "Book ",
    "Cancel",
    "Confirmed",
    "projector",
    "Engineering",
]


def search_params(days: int = 1, attendees: int = 3, equipment=("projector",)) -> dict:
    day = (timezone.localdate() + timedelta(days=days)).isoformat()
    return {
        "date": day,
        "start": "14:00",
        "end": "15:00",
        "attendees": attendees,
        "equipment": list(equipment),
    }


def book_data(room: str = "R7", attendees: int = 3) -> dict:
    start, end = slot(days=1)
    return {
        "room": room,
        "start_at": start.isoformat(),
        "end_at": end.isoformat(),
        "attendees": attendees,
        "equipment": ["projector"],
        "idempotency_key": str(uuid.uuid4()),
    }


def visible_text(html: str) -> str:
    """Text nodes plus the attributes people read or hear (title, aria-label, hx-confirm),
    without quoted room notes (data, not chrome)."""
    attributes = re.findall(r'(?:title|aria-label|hx-confirm)="([^"]*)"', html)
    body = html.split("<body", 1)[-1]
    body = re.sub(r"<(script|style|q)\b.*?</\1>", " ", body, flags=re.DOTALL)
    text = re.sub(r"<[^>]+>", " ", body)
    return unescape(" ".join([text, *attributes]))


def catalogue_entries(path: Path) -> list[dict]:
    """The entries of a .po file: msgctxt, msgid, msgid_plural, the msgstr list, the flags."""
    entries = []
    for block in path.read_text(encoding="utf-8").split("\n\n"):
        entry: dict = {"flags": [], "msgstr": []}
        last = None
        for line in block.strip().splitlines():
            if line.startswith("#,"):
                entry["flags"] += [flag.strip() for flag in line[2:].split(",")]
            elif line.startswith(("msgctxt ", "msgid ", "msgid_plural ")):
                last, value = line.split(" ", 1)
                entry[last] = value[1:-1]
            elif line.startswith("msgstr"):
                last = "msgstr"
                entry["msgstr"].append(line.split(" ", 1)[1][1:-1])
            elif line.startswith('"') and last == "msgstr":
                entry["msgstr"][-1] += line[1:-1]
            elif line.startswith('"') and last:
                entry[last] += line[1:-1]
        if "msgid" in entry:
            entries.append(entry)
    return entries


@pytest.fixture
def as_e17(client, e17):
    client.force_login(e17)
    return client


# --- which language a request gets ---


@pytest.mark.django_db
def test_english_is_the_default(as_e17):
    html = as_e17.get(SEARCH).text
    assert '<html lang="en">' in html
    assert "<h1>Find a room</h1>" in html
    assert "查找会议室" not in html


@pytest.mark.django_db
@pytest.mark.parametrize("accept", ["zh-hans", "zh-CN,zh;q=0.9,en;q=0.8", "zh-Hans-CN"])
def test_accept_language_chinese_gets_the_chinese_search_page(as_e17, accept):
    response = as_e17.get(SEARCH, HTTP_ACCEPT_LANGUAGE=accept)
    html = response.text
    assert '<html lang="zh-hans">' in html
    assert "<h1>查找会议室</h1>" in html
    assert "我的预订" in html
    assert "参会人数" in html
    assert "投影仪" in html
    assert "研发部" in html
    assert "Accept-Language" in response["Vary"]
    # The switcher names each language in that language.
    assert 'value="en" lang="en" class="btn btn-quiet">English</button>' in html
    assert '<span class="lang-current" lang="zh-hans" aria-current="true">简体中文</span>' in html
    text = visible_text(html)
    assert [word for word in ENGLISH_CHROME if word in text] == []


@pytest.mark.django_db
def test_unsupported_language_falls_back_to_english(as_e17):
    html = as_e17.get(SEARCH, HTTP_ACCEPT_LANGUAGE="fr-FR,fr;q=0.9").text
    assert '<html lang="en">' in html
    assert "<h1>Find a room</h1>" in html


# --- the switcher ---


@pytest.mark.django_db
def test_every_page_has_a_csrf_protected_language_switcher(client):
    html = client.get(reverse("login")).text
    form = html.split('class="inline language-switcher"')[0].rsplit("<form", 1)[1]
    assert 'method="post"' in form
    assert f'action="{SET_LANGUAGE}"' in form
    switcher = html.split('class="inline language-switcher"')[1].split("</form>")[0]
    assert 'name="csrfmiddlewaretoken"' in switcher
    assert 'name="language" value="zh-hans"' in switcher
    assert "简体中文" in switcher


@pytest.mark.django_db
def test_setlang_switches_the_language_and_keeps_it(e17):
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(e17)
    browser.get(SEARCH)  # sets the CSRF cookie, as a page visit does
    token = browser.cookies[settings.CSRF_COOKIE_NAME].value
    response = browser.post(
        SET_LANGUAGE, {"language": "zh-hans", "next": MINE, "csrfmiddlewaretoken": token}
    )
    assert response.status_code == 302
    assert response["Location"] == MINE
    assert browser.cookies[settings.LANGUAGE_COOKIE_NAME].value == "zh-hans"
    # The choice wins over the browser's Accept-Language.
    html = browser.get(SEARCH, HTTP_ACCEPT_LANGUAGE="en").text
    assert "<h1>查找会议室</h1>" in html
    back = browser.post(SET_LANGUAGE, {"language": "en", "csrfmiddlewaretoken": token})
    assert back.status_code == 302
    assert "<h1>Find a room</h1>" in browser.get(SEARCH, **ZH).text


@pytest.mark.django_db
def test_setlang_without_csrf_token_is_refused(e17):
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(e17)
    response = browser.post(SET_LANGUAGE, {"language": "zh-hans", "next": SEARCH})
    assert response.status_code == 403
    assert settings.LANGUAGE_COOKIE_NAME not in browser.cookies
    assert "<h1>Find a room</h1>" in browser.get(SEARCH).text


@pytest.mark.django_db
def test_setlang_ignores_an_unknown_language(as_e17):
    as_e17.post(SET_LANGUAGE, {"language": "xx", "next": SEARCH})
    assert settings.LANGUAGE_COOKIE_NAME not in as_e17.cookies
    assert "<h1>Find a room</h1>" in as_e17.get(SEARCH).text


# --- the screens in Chinese ---


@pytest.mark.django_db
@pytest.mark.usefixtures("rooms")
def test_search_results_in_chinese_with_local_date_format(as_e17):
    html = as_e17.get(SEARCH, search_params(), **HTMX, **ZH).text
    day = timezone.localdate() + timedelta(days=1)
    assert re.search(r"\d+ 间会议室空闲", html)
    assert f"{day.year}年{day.month}月{day.day}日 星期" in html
    assert "14:00–15:00，3 人，需要投影仪" in html
    assert "需审批" in html
    assert 'aria-label="预订 R7 ' in html
    text = visible_text(html)
    assert [word for word in ENGLISH_CHROME if word in text] == []


@pytest.mark.django_db
def test_search_refusal_in_chinese(as_e17):
    html = as_e17.get(SEARCH, search_params(days=-1), **HTMX, **ZH).text
    assert 'data-error-code="start_in_past"' in html
    assert "开始时间已经过去。" in html
    assert "请选择现在之后的时间。" in html


@pytest.mark.django_db
def test_form_errors_in_chinese_name_the_chinese_field(as_e17):
    html = as_e17.get(SEARCH, {**search_params(), "attendees": 0}, **HTMX, **ZH).text
    assert "请检查输入。参会人数：" in html
    assert "请修改搜索条件后重试。" in html


@pytest.mark.django_db(transaction=True)  # bookings go through the runtime
@pytest.mark.usefixtures("rooms")
def test_book_refusal_and_success_in_chinese(as_e17):
    refused = as_e17.post(BOOK, book_data(attendees=5), **HTMX, **ZH).text
    assert "R7 最多容纳 4 人，容纳不了 5 人。" in refused
    assert "请选择更大的会议室。" in refused
    booked = as_e17.post(BOOK, book_data(), **HTMX, **ZH).text
    assert re.search(r"已预订 R7，\d+月\d+日 14:00–15:00，预订编号 <strong>B\d+</strong>", booked)


@pytest.mark.django_db(transaction=True)  # bookings go through the runtime
@pytest.mark.usefixtures("rooms")
def test_flash_message_and_my_bookings_in_chinese(as_e17):
    response = as_e17.post(BOOK, book_data(), follow=True, **ZH)
    html = response.text
    assert re.search(r"已预订：R7，\d+月\d+日 14:00–15:00，预订编号 B\d+。", html)
    assert "<h1>我的预订</h1>" in html
    assert "已确认" in html
    assert "确定取消预订 B" in html
    text = visible_text(html)
    assert [word for word in ENGLISH_CHROME if word in text] == []


@pytest.mark.django_db(transaction=True)  # bookings go through the runtime
@pytest.mark.usefixtures("rooms")
def test_english_pages_keep_24_hour_times_and_day_month(as_e17):
    booked = as_e17.post(BOOK, book_data(), **HTMX).text
    start = timezone.localtime(slot(days=1)[0])
    assert f"Booked R7, {start.day} {start:%b} 14:00–15:00, code <strong>B" in booked
    mine = as_e17.get(MINE).text
    assert f"{start:%a} {start.day} {start:%b %Y}" in mine


# --- the model's text stays English ---


@pytest.mark.django_db
@pytest.mark.usefixtures("rooms")
def test_refusal_keeps_english_text_for_the_model_whatever_the_language(e17):
    start, end = slot(days=1)
    with translation.override("zh-hans"), pytest.raises(BookingError) as info:
        booking_reserve(
            user=e17,
            room_code="R7",
            start_at=start,
            end_at=end,
            attendees=2,
            equipment=["video"],
            idempotency_key="i18n-model-text",
        )
    error = info.value
    assert error.message == "R7 has no video."
    assert error.hint == "Pick a room that has it."
    with translation.override("zh-hans"):
        assert error.display_message == "R7 没有视频会议设备。"
        assert error.display_hint == "请选择配有该设备的会议室。"
    with translation.override("en"):
        assert error.display_message == error.message


def test_error_without_hint_displays_no_hint():
    with translation.override("zh-hans"):
        assert (
            BookingError(
                "not_found", "x", "There is no room %(room)s.", params={"room": "R1"}
            ).display_hint
            == ""
        )


# --- the catalogue and its build ---


def test_every_chinese_msgid_is_translated_and_none_is_fuzzy():
    entries = catalogue_entries(CATALOGUE)
    header, messages = entries[0], entries[1:]
    assert header["msgid"] == ""
    assert "fuzzy" not in header["flags"]
    assert "Plural-Forms: nplurals=1; plural=0;" in header["msgstr"][0]
    assert len(messages) > 50
    untranslated = [e["msgid"] for e in messages if not all(e["msgstr"]) or not e["msgstr"]]
    fuzzy = [e["msgid"] for e in messages if "fuzzy" in e["flags"]]
    assert untranslated == []
    assert fuzzy == []
    # Chinese has one plural form: a second one would never be shown.
    assert [e["msgid"] for e in messages if len(e["msgstr"]) != 1] == []


def test_compiled_catalogue_exists_and_is_newer_than_its_source():
    compiled = CATALOGUE.with_suffix(".mo")
    assert compiled.exists(), "no django.mo: run `make compilemessages` (make run/test do)"
    assert compiled.stat().st_mtime >= CATALOGUE.stat().st_mtime, (
        "django.mo is older than django.po: run `make compilemessages`"
    )


def test_the_compiled_catalogue_is_the_one_django_uses():
    with translation.override("zh-hans"):
        assert translation.gettext("Find a room") == "查找会议室"
        assert translation.pgettext("equipment", "projector") == "投影仪"
