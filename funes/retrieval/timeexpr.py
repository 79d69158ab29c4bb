"""Time in a question: "last week", "three days ago", "in March", "yesterday".

Questions about one's own history often say when ("what did we decide last Tuesday?", "the
bug from two weeks ago"). `parse` turns the expressions it recognises into a window of time,
relative to the moment the question is asked, and recall boosts passages from inside it. It
is a preference, never a filter: relative dates are vague ("a month ago" may be five weeks),
so the boost fades with the distance from the window instead of stopping at its edge, and a
passage outside it can still win on its words. An explicit filter is `--since`/`--until`.

Recognised (English, case-insensitive): today, yesterday, the day before yesterday, tonight,
this morning; last/this/past week, weekend, month, year; last <weekday>; on <weekday> (the
most recent one); N days/weeks/months/years ago (N in digits or words, "a", "a couple of",
"a few", "several"); the past/last N days/weeks/months; recently, lately; in <month> (the most
recent one not after now), <month> <year>. Anything else yields no window.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta

__all__ = ["TimeWindow", "parse"]

_DAY = timedelta(days=1)
_NUMBERS = {
    "a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6,
    "seven": 7, "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12,
    "a couple of": 2, "couple of": 2, "a couple": 2, "a few": 3, "few": 3, "several": 4,
}
_UNIT_DAYS = {"day": 1, "week": 7, "month": 30, "year": 365}
_WEEKDAYS = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]
_MONTHS = ["january", "february", "march", "april", "may", "june", "july", "august",
           "september", "october", "november", "december"]
_NUM = r"(\d{1,3}|a couple of|couple of|a couple|a few|few|several|an?|one|two|three|four|five|" \
       r"six|seven|eight|nine|ten|eleven|twelve)"
_UNIT = r"(day|week|month|year)s?"

_AGO = re.compile(rf"\b{_NUM}\s+{_UNIT}\s+ago\b", re.I)
_PAST_N = re.compile(rf"\b(?:past|last|previous)\s+{_NUM}\s+{_UNIT}\b", re.I)
_LAST_UNIT = re.compile(r"\b(last|past|previous|this)\s+(week(?:end)?|month|year)\b", re.I)
_WEEKDAY = re.compile(r"\b(last|on|this past|past)\s+(" + "|".join(_WEEKDAYS) + r")\b", re.I)
_MONTH = re.compile(r"\b(?:in|during|since|of|back in)\s+(" + "|".join(_MONTHS) + r")"
                    r"(?:\s+(\d{4}))?\b", re.I)
_SIMPLE = {
    "the day before yesterday": (2, 1),
    "yesterday": (1, 0),
    "last night": (1, 0),
    "today": (0, -1),
    "tonight": (0, -1),
    "this morning": (0, -1),
    "recently": (30, -1),
    "lately": (30, -1),
}


@dataclass(frozen=True)
class TimeWindow:
    """When a question points to: `start` ≤ t < `end` (UTC), and the words that said so."""

    start: datetime
    end: datetime
    phrase: str

    @property
    def width(self) -> timedelta:
        """How long the window is (at least a day)."""
        return max(self.end - self.start, _DAY)

    def closeness(self, when: datetime) -> float:
        """1 inside the window, falling off linearly to 0 one window-width (≥ 2 days) away."""
        if self.start <= when < self.end:
            return 1.0
        gap = self.start - when if when < self.start else when - self.end
        fade = max(self.width, 2 * _DAY)
        return max(0.0, 1.0 - gap / fade)


def _count(word: str) -> int:
    word = " ".join(word.lower().split())
    return int(word) if word.isdigit() else _NUMBERS.get(word, 1)


def _day_start(when: datetime) -> datetime:
    return when.replace(hour=0, minute=0, second=0, microsecond=0)


def parse(question: str, now: datetime) -> TimeWindow | None:
    """The first time expression of `question` as a window relative to `now`, or None."""
    text = question.lower()
    today = _day_start(now)
    hits: list[tuple[int, TimeWindow]] = []

    for phrase, (back, until_back) in _SIMPLE.items():
        for m in re.finditer(rf"\b{phrase}\b", text):
            start = today - back * _DAY
            end = now if until_back < 0 else today - until_back * _DAY
            hits.append((m.start(), TimeWindow(start, max(end, start + _DAY), m.group(0))))
    for m in _AGO.finditer(text):
        days = _count(m.group(1)) * _UNIT_DAYS[m.group(2).lower()]
        centre = today - days * _DAY
        half = max(_DAY, timedelta(days=days / 4))  # "a month ago" ≈ 3-5 weeks ago
        hits.append((m.start(), TimeWindow(centre - half, centre + half + _DAY, m.group(0))))
    for m in _PAST_N.finditer(text):
        days = _count(m.group(1)) * _UNIT_DAYS[m.group(2).lower()]
        hits.append((m.start(), TimeWindow(today - days * _DAY, now, m.group(0))))
    for m in _LAST_UNIT.finditer(text):
        which, unit = m.group(1).lower(), m.group(2).lower()
        if unit == "weekend":
            # The most recent Saturday–Sunday that has begun (this weekend when it is one).
            saturday = today - ((today.weekday() - 5) % 7) * _DAY
            start, end = saturday, saturday + 2 * _DAY
        elif which == "this":
            days = _UNIT_DAYS[unit]
            start, end = today - (today.weekday() if unit == "week" else days) * _DAY, now
        else:
            days = _UNIT_DAYS[unit]
            start, end = today - days * _DAY, now
        hits.append((m.start(), TimeWindow(start, max(end, start + _DAY), m.group(0))))
    for m in _WEEKDAY.finditer(text):
        target = _WEEKDAYS.index(m.group(2).lower())
        back = (today.weekday() - target) % 7 or 7
        day = today - back * _DAY
        hits.append((m.start(), TimeWindow(day, day + _DAY, m.group(0))))
    for m in _MONTH.finditer(text):
        month = _MONTHS.index(m.group(1).lower()) + 1
        if m.group(1).lower() == "may" and m.group(2) is None and not m.group(0).lower().startswith(
            ("in ", "during ", "back in ")
        ):
            continue  # "of may" / "since may" without a year is too often the verb
        year = int(m.group(2)) if m.group(2) else today.year - (month > today.month)
        try:
            start = today.replace(year=year, month=month, day=1)
        except ValueError:
            continue
        end = start.replace(year=year + (month == 12), month=month % 12 + 1)
        hits.append((m.start(), TimeWindow(start, end, m.group(0))))
    if not hits:
        return None
    hits.sort(key=lambda h: h[0])
    return hits[0][1]
