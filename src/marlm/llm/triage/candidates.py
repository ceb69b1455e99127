"""Candidates for an order note's instructions, found by a parser in English and Chinese.

The parser never decides: it lists what a note *could* mean, each with the words around it, and
a model chooses among them (:mod:`marlm.llm.triage.instructions`). A value no candidate holds can
never become an instruction, so a model cannot invent an order id, a station or a time.

What it finds:

- **deadlines**, in whole minutes after the order's clock time: clock times (``11:00``,
  ``3pm``, ``3:30 pm``, ``noon``, ``11点``, ``11点半``, ``十一点三十分``, ``下午3点``; a time
  earlier than the order's is the next day's) and relative phrases (``within 30 minutes``,
  ``in 2 hours``, ``in 1.5 hrs``, ``within the hour``, ``half an hour``, ``半小时内``, ``20分钟内``, ``一刻钟``, ``两个小时``);
- **order ids** ``o12``, ``O-12``, ``o 12``, and without the ``o``: ``order 12``, ``#12``,
  ``订单12``, ``和12一起`` (normalised to ``o12``; leading zeros kept);
- **stations**: the letter of a station next to a station word (``dock B``, ``station C``,
  ``B口``, ``C站``, ``to C``) and the station's description as the user wrote it (``cold
  chain``), or its Chinese word for a few common ones (``冷链``);
- **cancellation cues**: ``cancel``, ``drop it``, ``no longer needed``, ``取消``, ``不要了``, ...;
- **tone cues**, the words that say how urgently the writer asks: ``urgent``/``low`` values for
  ``asap``, ``rush``, ``line is stopped``, ``customer waiting``, ``加急``, ``马上``, ``急`` and for
  ``no rush``, ``whenever you can``, ``can wait``, ``low priority``, ``不急``, ``有空再``,
  ``明天也行``; a negated urgent word is a low cue (``not urgent``, ``不着急``), found first.

Every candidate keeps its ``span`` (character offsets in the note) and its ``context``: the
clause holding it (cut at sentence and clause punctuation), which is what the model reads.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from marlm.errors import InputError

#: Minutes in a day: a clock time earlier than the order's is the next day's.
DAY_MIN = 24 * 60

#: Other words, English and Chinese, for a few station descriptions (lower case): a note says
#: "keep it chilled" or "冷冻品" of the station the user described as "cold chain".
STATION_GLOSSARY: dict[str, tuple[str, ...]] = {
    "cold chain": (
        "冷链",
        "冷藏",
        "冷库",
        "冷冻",
        "冷柜",
        "refrigerated",
        "refrigeration",
        "refrigerate",
        "chilled",
        "fridge",
        "freezer",
        "frozen",
        "cold storage",
    ),
    "frozen": ("冷冻",),
    "dock": ("码头", "月台"),
    "returns": ("退货",),
    "hazmat": ("危险品",),
    "express": ("快递", "加急口"),
}

_CN_DIGITS = {"零": 0, "〇": 0, "一": 1, "二": 2, "两": 2, "三": 3, "四": 4, "五": 5, "六": 6,
              "七": 7, "八": 8, "九": 9}  # fmt: skip
_EN_NUMBERS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "ten": 10,
               "fifteen": 15, "twenty": 20, "thirty": 30, "forty": 40, "forty-five": 45,
               "fifty": 50, "sixty": 60, "ninety": 90, "a": 1, "an": 1}  # fmt: skip
_NUM = r"(?:\d{1,3}|[零〇一二两三四五六七八九十]{1,3})"
_CLAUSE_BREAKS = re.compile(r"[.;!?。；！？,，\n]|\s—\s|\s-\s|\bbut\b|但是|不过|但")


def cn_number(text: str) -> int | None:
    """``"30"``, ``"三十"``, ``"二十五"``, ``"十"``, ``"两"`` -> int; None when not a number."""
    if text.isdigit():
        return int(text)
    if not text or any(ch not in _CN_DIGITS and ch != "十" for ch in text):
        return None
    if "十" in text:
        tens, _, ones = text.partition("十")
        t = _CN_DIGITS.get(tens) if tens else 1
        o = _CN_DIGITS.get(ones) if ones else 0
        if t is None or o is None:
            return None
        return t * 10 + o
    if len(text) == 1:
        return _CN_DIGITS[text]
    return None


@dataclass(frozen=True)
class Candidate:
    """One thing a note may say.

    Attributes:
        kind: ``"deadline"``, ``"with"``, ``"station"`` or ``"cancel"``.
        value: minutes after the order's clock time (``int``, deadline), an order id (``str``,
            ``o12``), a station id (``str``, ``C``), ``True`` (cancel cue), or ``"urgent"`` /
            ``"low"`` (tone cue).
        text: the words matched, as written.
        span: ``(start, end)`` character offsets in the note.
        context: the clause holding the match, as written (what a model reads).
    """

    kind: str
    value: int | str | bool
    text: str
    span: tuple[int, int]
    context: str


@dataclass(frozen=True)
class Candidates:
    """Everything the parser found in one note, each list in note order."""

    deadline: list[Candidate] = field(default_factory=list)
    with_: list[Candidate] = field(default_factory=list)
    station: list[Candidate] = field(default_factory=list)
    cancel: list[Candidate] = field(default_factory=list)
    tone: list[Candidate] = field(default_factory=list)
    #: The cancellation as the note's wording settles it, ``None`` where only the model can
    #: tell (:func:`marlm.llm.triage.verdicts.settle`).
    cancel_settled: bool | None = None
    #: The ship-with id the wording settles, ``False`` where it rules every id out, ``None``
    #: where only the model can tell (:func:`marlm.llm.triage.verdicts.settle`).
    with_settled: str | bool | None = None

    def values(self, kind: str) -> list[int | str]:
        """The distinct values of one kind (``deadline``, ``with``, ``station``, ``cancel``,
        ``tone``), note order."""
        found = {"deadline": self.deadline, "with": self.with_, "station": self.station,
                 "cancel": self.cancel, "tone": self.tone}[kind]  # fmt: skip
        return list(dict.fromkeys(c.value for c in found))


def parse_clock(text: str, *, source: str = "time", line: int | None = None) -> int:
    """``"HH:MM"`` (24-hour) -> minutes after midnight.

    Raises:
        InputError: not ``HH:MM`` with ``HH`` in 0-23 and ``MM`` in 0-59.
    """
    m = re.fullmatch(r"(\d{1,2}):(\d{2})", text.strip()) if isinstance(text, str) else None
    if m is None or int(m[1]) > 23 or int(m[2]) > 59:
        raise InputError(
            f'got {text!r}; write the order\'s clock time as "HH:MM" (24-hour), e.g. "09:30"',
            source=source,
            line=line,
            field="time",
        )
    return int(m[1]) * 60 + int(m[2])


def parse_stations(text: str | None) -> dict[str, str]:
    """``"A=dock A,B=dock B,C=cold chain"`` -> ``{"A": "dock A", "B": "dock B", "C": "cold
    chain"}``; a bare ``"A,B,C"`` names stations without descriptions. None or ``""``: ``{}``.

    Raises:
        InputError: an id that is not 1 to 3 capital letters (a layout names its stations ``A``
            to ``Z``, then ``AA``, ...), an id given twice, or a description holding ``=``
            (stations joined by another separator than a comma) (field ``--stations``).
    """
    out: dict[str, str] = {}
    for part in (text or "").split(","):
        if not part.strip():
            continue
        sid, _, desc = part.partition("=")
        sid, desc = sid.strip(), desc.strip()
        if not re.fullmatch(r"[A-Z]{1,3}", sid):
            raise InputError(
                f"station id {sid!r} is not 1 to 3 capital letters (a layout's stations are A, "
                'B, C, ...); write ID=description, comma-separated, e.g. --stations "A=dock '
                'A,B=dock B,C=cold chain"',
                source="--stations",
                field="--stations",
            )
        if "=" in desc:
            raise InputError(
                f"station {sid!r} has the description {desc!r}, which holds '='; separate "
                'stations with commas, e.g. --stations "A=dock A,B=dock B"',
                source="--stations",
                field="--stations",
            )
        if sid in out:
            raise InputError(
                f"station {sid!r} given twice; give each station once",
                source="--stations",
                field="--stations",
            )
        out[sid] = desc
    return out


def span_between(
    note: str, span: tuple[int, int], breaks: re.Pattern[str] = _CLAUSE_BREAKS
) -> tuple[int, int]:
    """``(left, right)``: the stretch of ``note`` holding ``span``, from the end of the last
    ``breaks`` match before it to the start of the first one after it (default: the clause,
    cut at sentence and clause punctuation, ``but``, ``但``)."""
    left = 0
    for m in breaks.finditer(note, 0, span[0]):
        left = m.end()
    after = breaks.search(note, span[1])
    return left, after.start() if after else len(note)


def _context(note: str, start: int, end: int) -> str:
    """The clause of ``note`` holding ``[start, end)`` (:func:`span_between`)."""
    left, right = span_between(note, (start, end))
    return note[left:right].strip() or note[start:end]


def _cand(kind: str, value: int | str | bool, note: str, m: re.Match, group: int = 0) -> Candidate:
    s, e = m.span(group)
    return Candidate(kind, value, m.group(group), (s, e), _context(note, s, e))


# --------------------------------------------------------------------------- deadlines
_EN_CLOCK = re.compile(
    r"(?<![\d:])(\d{1,2})(?::(\d{2}))?\s*(a\.?m\.?|p\.?m\.?)(?![a-z])|(?<![\d:.])(\d{1,2}):(\d{2})(?![\d:])",
    re.IGNORECASE,
)
_EN_NOON = re.compile(r"\b(noon|midday|midnight)\b", re.IGNORECASE)
# "half past five", "quarter to six": the hour in words or digits (the sooner of its two times)
_EN_PAST = re.compile(
    r"\b(half|(?:a )?quarter)\s+(past|to)\s+(\d{1,2}|one|two|three|four|five|six|seven|eight|nine"
    r"|ten|eleven|twelve)\b",
    re.IGNORECASE,
)
_EN_HOURS = {w: k for k, w in enumerate(
    ["one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve"], start=1)}  # fmt: skip
# an hour alone after a deadline word: "by 4", "out by 11", "before 9 o'clock" (not "by 4 pm",
# which _EN_CLOCK reads, nor "by 4 pallets")
_EN_BARE_HOUR = re.compile(
    r"\b(?:by|before|until|till|no later than)\s+(\d{1,2})(?:\s*o'?clock)?(?![\d:]|\.\d)"
    r"(?!\s*(?:a\.?m|p\.?m|min|h\b|hours?|hrs?|days?|weeks?|%|x\b|pallets?|box|boxes|cases?"
    r"|units?|items?|cartons?|pcs|pieces?|bags?|kg|lbs?|people|robots?))",
    re.IGNORECASE,
)
_ZH_CLOCK = re.compile(
    rf"(凌晨|早上|今早|上午|中午|下午|傍晚|晚上|今晚)?({_NUM})[点點时](?:(半)|(一刻)|(三刻)|({_NUM})分?)?"
)
_EN_REL = re.compile(
    r"\b(half an hour|half-hour|a quarter of an hour|quarter of an hour|an hour and a half"
    r"|the hour|(\d{1,3}(?:\.\d+)?|one|two|three|four|five|six|ten|fifteen|twenty|thirty|forty-five|forty|fifty"
    r"|sixty|ninety|an?)\s*(minutes?|mins?|hours?|hrs?|h)\b)",
    re.IGNORECASE,
)
_ZH_REL = re.compile(rf"(半个?小时|一刻钟|({_NUM})个?半?(?:小时|钟头)|({_NUM})分钟)")


#: A clock time at most this many minutes before the order's own time is an event that has
#: happened ("called at 9:30" on an order at 09:50, "司机八点到的" at 08:20), not a deadline
#: half a day ahead.
PAST_MIN = 120


#: A word for tomorrow just before a clock time, in its clause (``tomorrow morning by 9``,
#: ``tmrw 10am``, ``明早八点前``, ``明天下午三点``).
_TOMORROW = re.compile(r"(?:\btomorrow|\btmrw|\btmr|\bnext morning)\b[^.;!?,\n]{0,24}$|(?:明早|明天|明日|明儿|明晚)[^，,。；！？\s]{0,4}$",
                       re.IGNORECASE)  # fmt: skip


_TOMORROW_AFTER = re.compile(r"\s*(?:tomorrow|tmrw|tmr)\b", re.IGNORECASE)


def _tomorrow(note: str, m: re.Match) -> bool:
    """Whether the clock time ``m`` is tomorrow's: :data:`_TOMORROW` right before it, or
    ``tomorrow`` right after it (``by 9:30 tomorrow``)."""
    before = _TOMORROW.search(note[max(0, m.start() - 32) : m.start()]) is not None
    return before or _TOMORROW_AFTER.match(note, m.end()) is not None


def _clock_minutes(
    hour: int, minute: int, now: int, *, twelve: bool = False, tomorrow: bool = False
) -> int | None:
    """Minutes from ``now`` to the next ``hour:minute``; ``twelve``: an hour written without
    a.m./p.m. (``4点``, ``4:15``) is the sooner of its morning and afternoon times. None for an
    impossible time or one within :data:`PAST_MIN` minutes before ``now`` (either reading).
    ``tomorrow``: the time is on the next day (an hour without a.m./p.m. from 7 to 12 is the
    morning's, from 1 to 6 the afternoon's: working hours)."""
    if not (0 <= hour <= 24 and 0 <= minute <= 59):
        return None
    t = (hour % 24) * 60 + minute
    if tomorrow:
        if twelve and 1 <= hour <= 6:
            t += DAY_MIN // 2
        return DAY_MIN - now + t
    readings = [t, t + DAY_MIN // 2] if twelve and 1 <= hour <= 12 else [t]
    if any(0 < (now - r) % DAY_MIN <= PAST_MIN for r in readings):
        return None
    return min((r - now) % DAY_MIN for r in readings)


def _not_a_clock(note: str, m: re.Match) -> bool:
    """``一点`` that means "a little", not one o'clock: ``一点都不急``, ``一点儿``, ``快一点``."""
    if m[1] or m.group(0)[-1] not in "点點" or cn_number(m[2]) != 1:
        return False
    after = note[m.end() : m.end() + 1]
    before = note[m.start() - 1 : m.start()] if m.start() else ""
    return after in ("都", "也", "儿", "兒") or before in tuple("差有快慢早晚好多")


def _deadlines(note: str, now: int) -> list[Candidate]:
    out: list[Candidate] = []
    taken: list[tuple[int, int]] = []

    def add(c: Candidate) -> None:
        if any(s < c.span[1] and c.span[0] < e for s, e in taken):
            return
        taken.append(c.span)
        out.append(c)

    for m in _EN_CLOCK.finditer(note):
        if m[3]:  # 3pm, 3:30 p.m.
            h, mi = int(m[1]), int(m[2] or 0)
            if h > 12:
                continue
            h = h % 12 + (12 if m[3].lower().startswith("p") else 0)
            v = _clock_minutes(h, mi, now, tomorrow=_tomorrow(note, m))
        else:  # 24-hour unless written with one digit ("4:15": the sooner of 04:15, 16:15)
            h, mi = int(m[4]), int(m[5])
            v = _clock_minutes(h, mi, now, twelve=len(m[4]) == 1,
                               tomorrow=_tomorrow(note, m))  # fmt: skip
        if v is not None:
            add(_cand("deadline", v, note, m))
    for m in _EN_PAST.finditer(note):
        h = int(m[3]) if m[3].isdigit() else _EN_HOURS[m[3].lower()]
        past = 30 if m[1].lower() == "half" else 15
        h, mi = (h, past) if m[2].lower() == "past" else (h - 1, 60 - past)
        v = _clock_minutes(h, mi, now, twelve=True, tomorrow=_tomorrow(note, m))
        if v is not None:
            add(_cand("deadline", v, note, m))
    for m in _EN_BARE_HOUR.finditer(note):
        v = _clock_minutes(int(m[1]), 0, now, twelve=True, tomorrow=_tomorrow(note, m))
        if v is not None:
            add(_cand("deadline", v, note, m, 1))
    for m in _EN_NOON.finditer(note):
        v = _clock_minutes(0 if m[1].lower() == "midnight" else 12, 0, now)
        if v is not None:
            add(_cand("deadline", v, note, m))
    for m in _ZH_CLOCK.finditer(note):
        hour = cn_number(m[2])
        if hour is None or hour > 24:
            continue
        minute: int | None
        if m[3]:
            minute = 30
        elif m[4]:
            minute = 15
        elif m[5]:
            minute = 45
        elif m[6]:
            minute = cn_number(m[6])
        else:
            minute = 0
        if minute is None or _not_a_clock(note, m):
            continue
        if m[1] in ("下午", "傍晚", "晚上", "今晚") and hour < 12 or m[1] == "中午" and hour < 6:
            hour += 12
        tomorrow = _tomorrow(note, m)
        v = _clock_minutes(hour, minute, now, twelve=not m[1], tomorrow=tomorrow)
        if v is not None:
            add(_cand("deadline", v, note, m))
    for m in _EN_REL.finditer(note):
        phrase = m[1].lower()
        if phrase in ("half an hour", "half-hour"):
            v = 30
        elif "quarter" in phrase:
            v = 15
        elif phrase == "an hour and a half":
            v = 90
        elif phrase == "the hour":  # "within the hour"
            v = 60
        else:
            n = float(m[2]) if m[2][0].isdigit() else _EN_NUMBERS.get(m[2].lower())
            if n is None:
                continue
            v = round(n * 60) if m[3].lower().startswith("h") else round(n)
        add(_cand("deadline", v, note, m))
    for m in _ZH_REL.finditer(note):
        phrase = m[1]
        if phrase.startswith("半"):
            v = 30
        elif phrase == "一刻钟":
            v = 15
        elif m[2] is not None:
            n = cn_number(m[2])
            if n is None:
                continue
            v = n * 60 + (30 if "半" in phrase else 0)
        else:
            n = cn_number(m[3])
            if n is None:
                continue
            v = n
        add(_cand("deadline", v, note, m))
    out.sort(key=lambda c: c.span)
    return out


# --------------------------------------------------------------------------- order ids
_ORDER_ID = re.compile(r"(?<![A-Za-z0-9])[oO](?:-|\s)?(\d{1,5})(?![A-Za-z0-9])")
# an id written without its "o": "order 622", "#622", "订单622", "和656一起", "与670同车"
_BARE_ORDER_ID = re.compile(
    r"(?:\border\s*(?:no\.?|number)?\s*#?|#|订单|单号)\s*(\d{1,5})(?![\d:])"
    r"|(?<=[和跟与同])\s*(\d{1,5})(?=\s*(?:一起|同|合并|放|装))|(\d{1,5})(?=号单|号订单)",
    re.IGNORECASE,
)


def normalise_order_id(text: str) -> str:
    """``"O-12"``, ``"o 12"``, ``"o12"`` -> ``"o12"`` (leading zeros kept)."""
    m = _ORDER_ID.fullmatch(text.strip())
    return f"o{m[1]}" if m else text.strip().lower()


def same_order_id(a: str, b: str) -> bool:
    """Whether two ids name one order: equal after :func:`normalise_order_id`, or ``o``-ids
    with equal numbers (``o7`` and ``o07``)."""
    na, nb = normalise_order_id(a), normalise_order_id(b)
    if na == nb:
        return True
    ma, mb = re.fullmatch(r"o(\d+)", na), re.fullmatch(r"o(\d+)", nb)
    return bool(ma and mb and int(ma[1]) == int(mb[1]))


def _order_ids(note: str, own_id: str | None) -> list[Candidate]:
    out = []
    for m in _ORDER_ID.finditer(note):
        oid = f"o{m[1]}"
        if own_id is not None and same_order_id(oid, own_id):
            continue
        out.append(_cand("with", oid, note, m))
    for m in _BARE_ORDER_ID.finditer(note):
        group = next(k for k in (1, 2, 3) if m[k])
        oid = f"o{m[group]}"
        if own_id is not None and same_order_id(oid, own_id):
            continue
        if not any(c.span[0] <= m.start(group) < c.span[1] for c in out):
            out.append(_cand("with", oid, note, m, group))
    out.sort(key=lambda c: c.span)
    return out


# --------------------------------------------------------------------------- stations
_EN_STATION_WORDS = r"(?:dock|station|gate|door|bay|stn|port|lane|counter)"
_ZH_STATION_WORDS = r"(?:号口|号站|号门|口|站|门|区)"


def _stations(note: str, stations: dict[str, str]) -> list[Candidate]:
    out: list[Candidate] = []
    taken: list[tuple[int, int]] = []
    lower = note.lower()

    def add(sid: str, s: int, e: int) -> None:
        if any(a < e and s < b for a, b in taken):
            return
        taken.append((s, e))
        out.append(Candidate("station", sid, note[s:e], (s, e), _context(note, s, e)))

    # descriptions first (longest first), so "dock A" is one match, not "dock" plus "A"
    described = sorted(((d, sid) for sid, d in stations.items() if d), key=lambda x: -len(x[0]))
    for desc, sid in described:
        words = [desc.lower()] + [w for k, ws in STATION_GLOSSARY.items() if k == desc.lower()
                                  for w in ws]  # fmt: skip
        for w in words:
            for m in re.finditer(re.escape(w), lower):
                s, e = m.span()
                before = lower[s - 1] if s else " "
                after = lower[e] if e < len(lower) else " "
                if w.isascii() and (before.isalnum() or after.isalnum()):
                    continue
                add(sid, s, e)
    for sid in stations:
        letter = re.escape(sid)
        patterns = [
            rf"\b{_EN_STATION_WORDS}\s*{letter}(?![A-Za-z0-9])",
            rf"(?<![A-Za-z0-9]){letter}\s*{_EN_STATION_WORDS}\b",
            rf"(?<![A-Za-z0-9]){letter}\s*{_ZH_STATION_WORDS}",
            rf"\bto\s+{letter}(?![A-Za-z0-9])",
            rf"(?:到|去|送|至|往|发){letter}(?![A-Za-z0-9])",
        ]
        for p in patterns:
            flags = re.IGNORECASE if p.startswith(r"\b" + _EN_STATION_WORDS) else 0
            for m in re.finditer(p, note, flags):
                add(sid, *m.span())
    out.sort(key=lambda c: c.span)
    return out


# --------------------------------------------------------------------------- cancel cues
_CANCEL = re.compile(
    r"\b(cancel(?:l?ed|l?ing|lation|s)?|cancled|cxl(?:d|ed)?|canx|call(?:ed)? (?:it|this|the order) off|drop (?:it|this"
    r"(?: order)?|the order)|scrap (?:it|this(?: order)?|the order|(?:order |#|o)?\d{3,})|void(?:ed)?|no longer "
    r"(?:needed|need(?:s|ed)? it|wanted)|(?:do not|don't|doesn't|does not) (?:need|want) (?:it|this)"
    r"(?: any ?more)?|not needed any ?more|never ?mind|pull(?:s|ed)? (?:the|this|their) order"
    r"|withdr(?:ew|awn|aws?) (?:the|this|their) order)\b"
    r"|(取消|不要了|撤单|撤回|撤销|撤了|撤掉|作废|退单|不用送了|别送了|不需要了|算了)",
    re.IGNORECASE,
)


def cancel_cues(note: str) -> list[Candidate]:
    """The cancellation cues of ``note``, each with its clause and what follows it."""
    out = []
    for m in _CANCEL.finditer(note):
        s, e = m.span()
        # the cue and everything after it: a withdrawal ("... no wait, keep it") follows it
        tail = note[max(0, _clause_start(note, s)) :].strip()
        out.append(Candidate("cancel", True, m.group(0), (s, e), tail))
    return out


# --------------------------------------------------------------------------- tone cues
# low first: a negated urgent word ("not urgent", "不急") is a low cue, and the urgent patterns
# skip what a low cue already holds
_LOW_EN = re.compile(
    r"\b(?:no (?:rush|hurry|urgency|pressure)|not (?:urgent|a priority|time[- ]?(?:critical|sensitive)"
    r"|in a hurry|pressing)|nothing urgent|no need to (?:rush|hurry)|(?:don't|do not) (?:rush|hurry)"
    r"|in no hurry|low(?:est)?[- ]prio(?:rity)?|not high[- ]prio(?:rity)?|whenever|when (?:you(?:'re)? "
    r"(?:can|are free|have time|get (?:a chance|to it|round to it))|convenient|possible)"
    r"|(?:it |this |that )?(?:can|could) wait|(?:next|later this) week|tomorrow(?:'s| is| would be)? "
    r"(?:fine|ok|okay)|(?:by|until|till) (?:tomorrow|next week|the end of the (?:week|month))"
    r"|take your time|in your own time|at your leisure|back of the queue"
    r"|(?:isn't|isn’t|isnt|is not|are not|aren't|was not|wasn't)\s+(?:that |very |super |really |too )?"
    r"(?:urgent|a rush|pressing|time[- ]?(?:critical|sensitive)))\b",
    re.IGNORECASE,
)
_URGENT_EN = re.compile(
    r"\b(?:urgent(?:ly)?|asap|a\.s\.a\.p|as soon as (?:possible|you can)|rush(?:ed)?|hurry|immediately"
    r"|right (?:away|now)|straight away|at once|top[- ]prio(?:rity)?|high[- ]prio(?:rity)?"
    r"|first prio(?:rity)?|priority (?:order|one)|express|expedite[ds]?|critical|emergency|pronto"
    r"|waiting|line (?:is )?(?:down|stopped|halted)|(?:production|assembly|machines?) (?:is |are |has "
    r"|have )?(?:stopped|down|halted|idle|stalled)|stopped|drop everything|jump the queue"
    r"|(?:front|top) of the (?:queue|pile|list)|quick(?:ly)?|fast)\b",
    re.IGNORECASE,
)
_LOW_ZH = re.compile(
    r"不(?:太|是很|怎么|用|必)?着?急|别着?急|没(?:那么|什么|啥)?急|不赶(?:时间)?|不紧急|不用赶|有空|慢慢"
    r"|明天(?:也|再)?(?:行|可以|发|送|都行)|明天再|下(?:个)?(?:周|星期|礼拜)|随便(?:什么时候|哪天)"
    r"|什么时候都(?:行|可以)|低优先级?|不优先|晚(?:点|些)(?:也|再)?(?:行|可以|送|发)|可以(?:等|缓|晚)"
    r"|不(?:用|必)(?:那么)?(?:快|赶)|不是(?:很|特别)?(?:加急|急件|急单|紧急|急的)|不算(?:很)?(?:急|紧急)|并不急"
)
_URGENT_ZH = re.compile(
    r"加急|急件|紧急|特急|急用|急需|急要|十万火急|火速|马上|立刻|立即|立马|赶紧|赶快|尽快|尽早|越快越好"
    r"|抓紧|快点|快些|快一点|优先|等着|在等|等货|停线|停产|停工|停机|停了|停摆|急"
)


def _tone_cues(note: str) -> list[Candidate]:
    out: list[Candidate] = []
    taken: list[tuple[int, int]] = []
    for rx, value in ((_LOW_EN, "low"), (_LOW_ZH, "low"), (_URGENT_EN, "urgent"),
                      (_URGENT_ZH, "urgent")):  # fmt: skip
        for m in rx.finditer(note):
            s, e = m.span()
            if not any(a < e and s < b for a, b in taken):
                taken.append((s, e))
                out.append(_cand("tone", value, note, m))
    out.sort(key=lambda c: c.span)
    return out


def named_alone(c: Candidate) -> bool:
    """Whether ``c`` is its clause's only words (``"dock A"``, ``"A口。"``): nothing beside it
    could rule it out, so it holds as written."""
    return c.context.strip(" \t.。,，!！;；:：()（）").casefold() == c.text.casefold()


def _clause_start(note: str, start: int) -> int:
    left = 0
    for m in _CLAUSE_BREAKS.finditer(note, 0, start):
        left = m.end()
    return left


def find_candidates(
    note: str, time: str | int, stations: dict[str, str] | None = None, own_id: str | None = None
) -> Candidates:
    """Every candidate instruction in ``note`` (module docstring).

    Args:
        note: the order's free text, any language.
        time: the order's clock time, ``"HH:MM"`` or minutes after midnight; deadlines are
            minutes after it.
        stations: station id -> description (:func:`parse_stations`); ``{}`` finds none.
        own_id: the order's own id, never a ship-with candidate.

    Returns:
        :class:`Candidates`, each list in note order.

    Raises:
        InputError: ``time`` is a string that is not ``HH:MM``.
    """
    now = parse_clock(time) if isinstance(time, str) else int(time) % DAY_MIN
    note = note or ""
    return Candidates(
        deadline=_deadlines(note, now),
        with_=_order_ids(note, own_id),
        station=_stations(note, stations or {}),
        cancel=cancel_cues(note),
        tone=_tone_cues(note),
    )


__all__ = [
    "DAY_MIN",
    "STATION_GLOSSARY",
    "Candidate",
    "Candidates",
    "cancel_cues",
    "cn_number",
    "find_candidates",
    "named_alone",
    "normalise_order_id",
    "parse_clock",
    "parse_stations",
    "same_order_id",
    "span_between",
]
