"""What a request asks for besides a room: something the assistant does not do (cancel, change),
a booking for another person, or a room in addition to one already held."""

from __future__ import annotations

import re

# Matched on normalized text (lower case, Chinese number words as digits).
# "cancel" is a verb whatever follows; "change", "move" and the like only with what they act on
# ("the change review meeting" is a booking request).
_CANCEL = re.compile(
    r"\b(?:cancel|call\s+off|unbook)\b(?!\s+(?:if|unless|when)\b)"
    r"|\b(?:delete|remove|reschedule|postpone|move|change|shift)\s+(?:all\s+)?"
    r"(?:my|our|the|this|that|these|those|it|them|all|every)\b"
    r"|取消|退订|撤销|删除|删掉|改期|推迟|改到|换到"
)
# "for e23", "on behalf of A01", "给e23订", "帮 e23 订", "替e23": an employee id after the
# words that name whom a booking is for ("帮我订" is the asker, no id).
_BENEFICIARY = re.compile(
    r"(?:\bfor|\bon\s+behalf\s+of|给|帮|替|为|代)\s*(?P<who>[ea]\d{1,6})(?![a-z0-9])"
)
_ANOTHER_ROOM = re.compile(
    r"\b(?:another|an?\s+(?:additional|extra|second|2nd)|1\s+more)\s+(?:meeting\s+)?room\b"
    r"|再\s*(?:订|约|预订|预约|要|开)\s*1?\s*[间个]|另外?\s*(?:再\s*)?(?:订|约|预订|预约)"
    r"|另\s*1\s*间|第\s*2\s*间|额外|多订|加订"
)


def wants_cancel_or_change(s: str) -> bool:
    return _CANCEL.search(s) is not None


def named_beneficiary(s: str) -> str | None:
    """The employee id a booking is asked for, upper case."""
    match = _BENEFICIARY.search(s)
    return match["who"].upper() if match is not None else None


def wants_another_room(s: str) -> bool:
    return _ANOTHER_ROOM.search(s) is not None


# --- jobs -----------------------------------------------------------------------------------
# Matched on normalized text. Each job has its own delegation (bookings.assistant).

MOVE = re.compile(
    r"\b(?:move|push|reschedule|postpone|shift|delay|prepone|bring\s+forward|pull\s+forward|"
    r"extend|shorten|bump|shove|slide|rebook|re-book|moved|pushed|rescheduled|postponed|"
    r"shifted|bumped)\b(?!\s+(?:if|unless)\b)"
    r"|\bpull\b(?=[^.?!]{0,80}\b(?:earlier|forward|back|in)\b)"
    r"|\bchange\s+(?:my|the|it|that|this|our)\b|\bswitch\s+(?:my|the|it|that)\b"
    r"|\b(?:update|amend|modify|adjust|edit)\s+(?:my|the|it|that|this|our)\b"
    r"|改到|改成|改期|推迟|延后|延期|提前|挪到|挪一下|挪个|往后推|往后挪|往前挪|换到|换个时间|换时间|改时间"
    r"|改一下时间|调到|调整到|调一下|延长|缩短|挪挪|顺延"
    # "后天的Reed换成Maple, 时间不变": another room for a booking held, at its time
    r"|(?:换成|改成|换到)[^,。]{0,16}[,]?\s*时间(?:不变|照旧|一样|不动)"
)
# A head count changed: "we'll be 6 now", "add 2 people", "2 more people are coming", "change the
# number of people to 6", "人数改成4个", "再加两个人", "少一个人". Read as a change of a booking.
HEADCOUNT = re.compile(
    r"\b(?:we'?ll|we\s+will|we'?re|we\s+are|there'?ll|there\s+will)\s+(?:now\s+)?be\s+\d+"
    r"(?:\s+(?:of\s+us|people|ppl|persons?|now))?\s*(?:now|instead|then)\b"
    r"|\b(?:now|actually)\s+(?:we'?re\s+|it'?s\s+)?\d+\s+(?:people|ppl|persons?|of\s+us)\b"
    r"|\b\d+\s+(?:people|ppl|persons?|of\s+us)\s+now\b"
    r"|\badd\s+(?:another\s+)?\d+\s*(?:more\s+)?(?:people|ppl|persons?|attendees?|guests?|seats?)\b"
    r"|\badd\s+(?:another|1\s+more)\s+(?:person|attendee|guest|seat)\b"
    r"|\b\d+\s+more\s+(?:people|ppl|persons?|attendees?|guests?|colleagues?)\b"
    r"|\b(?:headcount|head\s+count|number\s+of\s+(?:people|attendees|guests)|attendees|"
    r"attendee\s+count|group\s+size)\s+(?:to|is|=|->|now)\s*\d+"
    r"|\b(?:change|update|set|raise|lower|increase|reduce|bump)\s+(?:the\s+|my\s+)?(?:headcount|"
    r"head\s+count|number\s+of\s+(?:people|attendees|guests)|attendees|attendee\s+count)\b"
    r"|人数\s*(?:改|换|调|变|增|加|减|少|更新|修改)|(?:再|还要|还得|另外)?\s*(?<!我)(?:加|多|增加)\s*\d+\s*(?:个|位|名)?\s*(?:人|同事)"
    r"|少\s*\d+\s*(?:个|位|名)?\s*(?:人|同事)|(?:变成|改成|改为|增加到|减少到|加到|减到)\s*\d+\s*(?:个|位|名)?\s*人"
)
CANCEL = re.compile(
    r"\b(?:cancel|cancle|cancell|cnacel|call\s+off|unbook|delete|remove|release|free\s+up)\b"
    r"(?!\s+(?:if|unless|when)\b)"
    r"|\b(?:drop|scrap|kill|ditch|nix|bin|axe)\s+(?:my|the|it|that|this|all|our)\b"
    r"|\bget\s+rid\s+of\b|\bgive\s+up\s+(?:my|the|our|that|this)\b"
    r"|\b(?:don'?t|do\s+not|won'?t|will\s+not|no\s+longer|not\s+going\s+to)\s+need\s+"
    r"(?:the|my|our|it|that|this|them|those|these)\b(?!\s+(?:projector|whiteboard|phone|screen|"
    r"display|video|tv))"
    r"|\bnot\s+(?:needed|happening)\s+any\s*more\b|\b(?:is|are)\s+(?:off|cancell?ed)\b"
    r"|取消|退订|退掉|退了|撤销|删除|删掉|不要了|释放|不用了吧|不开了|作废|撤掉|退一下|不需要了|用不上了"
    r"|(?:会议室|房间|预订|预约|那个会|的会)[^，,。]{0,4}不用了"
)
LIST = re.compile(
    r"\b(?:what|which|when)\b[^?]{0,40}\b(?:did\s+i|have\s+i|do\s+i|i\s+have|i'?ve|am\s+i)\b"
    r"[^?]{0,30}\b(?:book(?:ed|ings?)?|reserv(?:ed|ations?)|have|got)\b"
    r"|\bmy\s+(?:bookings|reservations|meetings|rooms|booked\s+rooms|schedule)\b"
    r"|\b(?:show|list|see|check|view|give)\s+(?:me\s+)?(?:all\s+)?my\b"
    r"|\bdo\s+i\s+have\s+(?:a|any)\s+(?:room|booking|meeting|reservation)s?\b"
    r"|\bam\s+i\s+booked\b|\bwhere\s+is\s+my\s+(?:meeting|booking)\b"
    r"|^\s*(?:got\s+)?any\s+(?:bookings|reservations)\b"
    r"|我[^，,。]{0,8}(?:有哪些|有什么|有几个|有没有|订了哪|订了什么|订了几|约了哪|约了什么)[^，,。]{0,6}(?:预约|预订|会议|订单|会议室|房间)?"
    r"|我的(?:预约|预订|会议室预订|订单|会议安排)|(?:查|看)[^，,。]{0,4}我[^，,。]{0,4}(?:预约|预订|订了|订的|约的|定的)"
    r"|\bwhat'?s\s+on\s+my\s+(?:calendar|schedule|plate|agenda)\b"
    r"|\b(?:did|have)\s+i\s+(?:book|reserve)(?:ed)?\s+(?:anything|something|any\s+rooms?|a\s+room)\b"
    r"|\bwhat\s+(?:have|did)\s+i\s+(?:got\s+)?(?:booked|reserved)\b|\bwhat\s+have\s+i\s+got\b"
    r"|\b(?:do|did)\s+i\s+have\s+(?:anything|something|any\s+rooms?)\b"
    r"|\bmy\s+(?:upcoming|next|current|existing|booked)\s+(?:bookings?|reservations?|meetings?|rooms?)\b"
    r"|\b(?:anything|something)\s+(?:booked|reserved)\s+(?:for|under|in\s+the\s+name\s+of)\s+me\b"
    r"|^\s*(?:(?:do\s+i\s+)?(?:have|got)\s+)?(?:anything|something)\s+(?:on\s+)?for\s+me\b"
    r"|\bwhere\s+am\s+i\s+(?:meeting|booked)\b|\bwhich\s+rooms?\s+(?:have|did)\s+i\b"
    r"|我[^，,。]{0,6}(?:有|订了|约了|定了)(?:什么|啥|哪些|几个|没有)?\s*(?:会|会议|预订|预约|房间|会议室)(?:吗|呢|\?|？)?"
    r"|我[^，,。]{0,8}(?:订了|约了|定了|有)(?:啥|什么|哪些|哪几个)|我订的(?:会议室|房间|预订)|我的(?:会议|会|安排)"
    r"|列(?:出|一下|下|举)?[^，,。]{0,10}我[^，,。]{0,10}(?:预订|预约|订单)"
)
# "能订到会议室吗", "还有会议室可以订吗", "订得到吗": a question whose booking word is part of it
# (not "可以帮我订个会议室吗", a polite order).
_ZH_QUESTION = (
    r"(?<!帮我)(?<!给我)(?<!替我)(?:能|可以|还能|还可以|能不能|可不可以)\s*(?:订|预订|约|用)\s*(?:到|得到|上)?"
    r"[^，,。帮给替]{0,12}(?:吗|么|\?|？)|订得到|订得上|能订到|还有没有|有没有空|空吗|有人用吗|被占了吗|占了吗"
    r"|被(?:订|预订|约|占|用)(?:了|走|掉)?(?:吗|么|没|\?|？)"
)
AVAILABILITY = re.compile(
    r"\b(?:is|are)\b[^.?]{0,60}\b(?:free|available|open|taken|busy|booked|vacant)\b"
    r"|\b(?:which|what)\s+rooms?\b"
    r"|\b(?:any\s*(?:rooms?|thing|thng|thin|ting|where)|something)\b[^.?]{0,40}"
    r"\b(?:free|available|open)\b"
    r"|\b(?:free|available|open)\s+rooms?\b|\bavailability\b|\bwhen\s+is\b[^.?]{0,40}\b(?:free|available)\b"
    r"|\bis\s+there\s+(?:a|any)\s+(?:free\s+)?room\b|\bcheck\s+(?:if|whether)\b"
    r"|\bwhat'?s\s+(?:free|available|open)\b|\bwho\s+has\b"
    r"|空着|空闲|有空|空的|空不空|哪些会议室|哪个会议室|哪间|(?<!我)有没有[^，,。？?]{0,24}(?:会议室|房间|空|地方)"
    r"|(?:可用|能用)(?:吗|的)|被占|被订|看看|查\s*1?\s*下|看\s*1?\s*下|查查|帮我查|还有[^，,。]{0,6}(?:会议室|房间)"
    r"|\b(?:any\s+chance|is\s+it\s+possible)\b[^.?]{0,50}\b(?:room|free|available)\b"
    r"|\b(?:do\s+you\s+have|got|have\s+you\s+got)\s+(?:a|any)\s+(?:free\s+|empty\s+|open\s+)?rooms?\b[^.]*\?"
    r"|\banything\s+(?:open|free|available)\b"
    # "any whiteboard rooms open …?", "rooms free tomorrow 9-10?": rooms said with a state.
    r"|\bany\s+(?:\w+\s+){1,2}rooms?\b[^.?]{0,40}\b(?:free|available|open)\b"
    r"|\brooms?\s+(?:free|available|open|vacant)\b"
    # "is there a room with a projector for 5?", "有带投影仪、能坐5个人的会议室吗?": a question
    # about rooms is answered, never booked ("我…有…会议室吗" asks about the asker's bookings).
    r"|\b(?:is|are)\s+there\s+(?:a|an|any|some)?\s*(?:\w+\s+){0,3}rooms?\b"
    r"|(?:^|[,.?!;])[^我,.?!;]*有[^我,.?!;]{0,24}(?:会议室|房间)\s*(?:吗|么|嘛|\?)"
    r"|" + _ZH_QUESTION
)
BOOK_VERB = re.compile(
    r"\b(?:book|reserve|grab|take|get)\s+(?:it|that|one|them|the|a|me)\b|\bbook\b(?!able)"
    r"|订|预订|预约|定下|约一?个"
)
CONDITION = re.compile(
    r"\bif\s+(?:it'?s|it\s+is|its|so|yes|they\s+are|one\s+is|there\s+is|there'?s|available|free|"
    r"possible|open|not\s+taken)\b|\bif\s+(?:\w+\s+){0,3}(?:is|are)\s+(?:free|available|open)\b"
    r"|(?:如果|要是|假如|若)[^，,。]{0,12}(?:空|有|可以|能)|有的话|有空就|空的话|可以的话|没人用就|没被占就"
)
ASK_ONLY = re.compile(
    r"\bcan\s+i\s+book\b[^.]{0,20}\bwhich\b|\bwhich\b[^.]{0,30}\bcan\s+i\b|\bbookable\b"
)


def job_of(s: str) -> str | None:
    """The job a request names ("book", "availability", "list", "cancel", "move"), or None
    when it names none (a fragment: an answer to a question). A changed head count is a move
    (a change of a booking)."""
    if MOVE.search(s) and not CONDITION.search(s):
        return "move"
    if CANCEL.search(s):
        return "cancel"
    if HEADCOUNT.search(s):
        return "move"
    availability = AVAILABILITY.search(s) is not None
    booking_verb = BOOK_VERB.search(s) is not None
    ordered = booking_verb and CONDITION.search(s)
    if availability and not ordered and (not booking_verb or ASK_ONLY.search(s) or _asks_only(s)):
        return "availability"
    if LIST.search(s) and not (booking_verb and _book_imperative(s)):
        return "list"
    return None


def _asks_only(s: str) -> bool:
    """An availability question whose booking word is part of the question ("can I book
    Bamboo?", "哪些能订") rather than an order ("if so book it" is a condition)."""
    return bool(
        re.search(
            r"\bcan\s+(?:i|we)\s+(?:book|reserve|get|use)\b.*\?|能订吗|可以订吗|能不能订|可不可以订|"
            + _ZH_QUESTION,
            s,
        )
    ) and not CONDITION.search(s)


def _book_imperative(s: str) -> bool:
    return bool(
        re.search(
            r"^\s*(?:please\s+|pls\s+|plz\s+)?(?:book|reserve)\b|^\s*(?:帮我|请|麻烦)?\s*(?:订|预订)",
            s,
        )
    )


_SURNAMES = [
    "li",
    "wang",
    "zhang",
    "liu",
    "chen",
    "yang",
    "zhao",
    "huang",
    "zhou",
    "wu",
    "xu",
    "sun",
    "hu",
    "zhu",
    "gao",
    "lin",
    "guo",
    "ma",
    "luo",
    "liang",
    "song",
    "zheng",
    "xie",
    "han",
    "tang",
    "feng",
    "dong",
    "xiao",
    "cheng",
    "cao",
    "yuan",
    "deng",
    "fu",
    "shen",
    "zeng",
    "peng",
    "lu",
    "su",
    "jiang",
    "cai",
    "jia",
    "ding",
    "wei",
    "xue",
    "ye",
    "yan",
    "pan",
    "du",
    "dai",
    "xia",
    "zhong",
    "tian",
    "ren",
    "fan",
    "fang",
    "shi",
    "yao",
    "tan",
    "liao",
    "zou",
    "xiong",
    "jin",
    "hao",
    "kong",
    "bai",
    "cui",
    "kang",
    "mao",
    "qiu",
    "qin",
    "gu",
    "hou",
    "shao",
    "meng",
    "long",
    "wan",
    "duan",
    "qian",
]
_EN_FOR_PERSON = re.compile(
    r"\b(?:for|on\s+behalf\s+of)\s+(?:my\s+|our\s+|the\s+)?(?P<who>boss|manager|ceo|cto|cfo|coo|"
    r"director|supervisor|vp|assistant|secretary|colleague|coworker|co-worker|intern)\b"
    r"(?!\s+and\s+(?:me|i|myself)\b)"
    rf"|\b(?:for|on\s+behalf\s+of)\s+(?P<name>(?:{'|'.join(_SURNAMES)})\s+[a-z]{{2,8}})\b"
)
_EN_FOR_CAPITALIZED = re.compile(
    r"\b(?:for|on\s+behalf\s+of)\s+(?P<name>[A-Z][a-z]{1,12}(?:\s+[A-Z][a-z]{1,12})?)\b"
    r"|\bbook\s+(?P<name2>[A-Z][a-z]{1,12}(?:\s+[A-Z][a-z]{1,12})?)\s+a\s+room\b"
)
_NOT_A_PERSON = frozenset(
    [
        "Me",
        "Us",
        "Myself",
        "Ourselves",
        "Our",
        "My",
        "The",
        "A",
        "An",
        "This",
        "That",
        "Tomorrow",
        "Today",
        "Tonight",
        "Monday",
        "Tuesday",
        "Wednesday",
        "Thursday",
        "Friday",
        "Saturday",
        "Sunday",
        "Mon",
        "Tue",
        "Wed",
        "Thu",
        "Fri",
        "Sat",
        "Sun",
        "January",
        "February",
        "March",
        "April",
        "May",
        "June",
        "July",
        "August",
        "September",
        "October",
        "November",
        "December",
        "Jan",
        "Feb",
        "Mar",
        "Apr",
        "Jun",
        "Jul",
        "Aug",
        "Sep",
        "Sept",
        "Oct",
        "Nov",
        "Dec",
        "Next",
        "This",
        "Noon",
        "Lunch",
        "Team",
        "Meeting",
        "Planning",
        "Interview",
        "Standup",
        "Sprint",
        "Review",
        "Demo",
        "Training",
        "Workshop",
        "All",
        "Everyone",
        "People",
        "Two",
        "Three",
        "Four",
        "Five",
        "Six",
        "Seven",
        "Eight",
        "Nine",
        "Ten",
        "One",
        "Half",
        "Client",
        "Customer",
        "Project",
        "Sales",
        "Engineering",
        "Marketing",
        "Hr",
        "It",
        "Qa",
        "Board",
        "Weekly",
        "Daily",
        "Morning",
        "Afternoon",
        "Evening",
        "Q1",
        "Q2",
        "Q3",
        "Q4",
        "Zoom",
        "Teams",
        "Video",
        "Call",
        "Offsite",
        "Onsite",
    ]
)
_ZH_FOR_PERSON = re.compile(
    r"(?:帮|给|替|为|代)\s*(?P<who>(?!我|忙|大家|咱|自己|团队|部门|组|公司|本人|您)[\u4e00-\u9fff]{2,3}?)"
    r"\s*(?:订|预订|预约|约|定|安排|开|申请)"
)


# "帮我同事小李订", "给我老板订", "替我们经理约": someone the asker knows, named by role.
_ZH_FOR_ROLE = re.compile(
    r"(?:帮|给|替|为|代)\s*(?:我|我们|咱们)?(?:的|组的|部门的|团队的)?\s*"
    r"(?P<who>(?:同事|老板|领导|经理|上司|主管|组长|总监|老大|朋友|助理|客户|实习生|新同事|老师|"
    r"leader|boss|manager)[\u4e00-\u9fff]{0,3}?)\s*(?:订|预订|预约|约|定|安排|开|申请|找)"
)


def named_person(original: str, normalized: str, room_names: frozenset[str]) -> str | None:
    """Someone other than the asker a booking is asked for, named in words ("for Li Wei",
    "for my boss", "帮李伟订"): as written."""
    match = _EN_FOR_PERSON.search(normalized)
    if match is not None:
        return (match["who"] or match["name"]).title() if match["name"] else match["who"]
    for match in _EN_FOR_CAPITALIZED.finditer(original):
        name = match["name"] or match["name2"]
        first = name.split()[0]
        if (
            first not in _NOT_A_PERSON
            and name.lower() not in room_names
            and first.lower() not in room_names
        ):
            return name
    match = _ZH_FOR_PERSON.search(normalized) or _ZH_FOR_ROLE.search(normalized)
    if match is not None:
        return match["who"]
    return None


YES = re.compile(
    r"^\s*(?:y|ya|yes|yeah|yep|yup|sure|ok|okay|k|kk|confirm(?:ed)?|correct|right|go\s+ahead|"
    r"do\s+it|book\s+it|please\s+do|sounds\s+good|that'?s\s+(?:right|correct|fine)|perfect|"
    r"great|fine|alright|go\s+for\s+it|yes\s+please)\b"
    r"|^\s*(?:好的?|好啊|可以|行|是的?|对的?|确认|没问题|订吧|就这样|嗯+|订|预订吧|就它|就这个|确定)"
)
NO = re.compile(
    r"^\s*(?:no|nope|nah|don'?t|never\s*mind|stop|wait|not\s+(?:that|those|now))\b"
    r"|^\s*(?:不用|不要|算了|不对|别|先不|不订)"
)
_ORDINALS = {
    "first": 0,
    "1st": 0,
    "second": 1,
    "2nd": 1,
    "third": 2,
    "3rd": 2,
    "fourth": 3,
    "4th": 3,
    "fifth": 4,
    "5th": 4,
    "last": -1,
}
_PICK = re.compile(
    r"\b(?:the\s+)?(?P<word>first|1st|second|2nd|third|3rd|fourth|4th|fifth|5th|last)(?:\s+one)?\b"
    r"|\b(?:option|number|no\.?|#)\s*(?P<n>\d)\b|第\s*(?P<zh>\d)\s*(?:个|间|项|条)?|最后一?个"
)


def picked(s: str) -> int | None:
    """Which item of a list offered the person chose ("the second one", "第二个"): 0-based,
    -1 for the last."""
    match = _PICK.search(s)
    if match is None:
        return None
    if match["word"]:
        return _ORDINALS[match["word"]]
    if match["n"] or match["zh"]:
        return int(match["n"] or match["zh"]) - 1
    return -1


CORRECTION = re.compile(
    r"不是(?P<old>[^，,。;；]{1,12})[，,。;；\s]*(?:而)?是(?P<new>.+)"
    r"|\bnot\s+(?P<old2>[^,;]{1,20})[,;]\s*(?:but\s+|it'?s\s+|make\s+it\s+)?(?P<new2>.+)"
)
CHANGE_WORDS = re.compile(
    r"\b(?:instead|actually|make\s+it|change\s+(?:it\s+)?to|rather|sorry)\b|改成|换成|改为|其实|应该是"
)
