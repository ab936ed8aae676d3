"""Local time in the owner's configured timezone, and the owner's language for dates.

Journal days, task dates and memory timestamps are all local to the owner,
not to the machine memvault happens to run on, so one object answers
"what time is it for the owner" everywhere. It also carries the owner's
``locale``, so that "gestern" or "上周" is read as a day wherever text is.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import date, datetime, timedelta, tzinfo
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from memvault.dates import find_date, language_of, languages_for
from memvault.errors import ConfigError


def load_timezone(name: str | None) -> tzinfo:
    """Return the IANA timezone ``name``, or the machine's local zone when ``None``."""
    if not name:
        local = datetime.now().astimezone().tzinfo
        assert local is not None
        return local
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise ConfigError(
            f"Unknown timezone {name!r}; use an IANA name such as 'Europe/Berlin' or 'UTC'."
        ) from exc


def check_locale(locale: str | None) -> str | None:
    """``locale`` if memvault can read dates in it (None stays None); else ConfigError."""
    if not locale or not locale.strip():
        return None
    try:
        language_of(locale)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    return locale.strip()


class Clock:
    """Tells the current time in one timezone; tests pass a fixed ``now``.

    ``locale`` is the owner's language (a tag such as ``de`` or ``zh-Hans``):
    dates written in it are understood (:mod:`memvault.dates`). None: English only.
    """

    def __init__(
        self,
        tz: tzinfo | None = None,
        now: Callable[[], datetime] | None = None,
        locale: str | None = None,
    ) -> None:
        self.tz = tz if tz is not None else load_timezone(None)
        self._now = now
        self.locale = check_locale(locale)

    def now(self) -> datetime:
        """The current moment as an aware datetime in the owner's timezone."""
        moment = self._now() if self._now is not None else datetime.now(self.tz)
        if moment.tzinfo is None:
            return moment.replace(tzinfo=self.tz)
        return moment.astimezone(self.tz)

    def today(self) -> date:
        """The owner's local date."""
        return self.now().date()

    def localize(self, moment: datetime) -> datetime:
        """Interpret a naive datetime as owner-local; convert an aware one."""
        if moment.tzinfo is None:
            return moment.replace(tzinfo=self.tz)
        return moment.astimezone(self.tz)

    def day_named(self, text: str, moment: datetime) -> date | None:
        """The day a phrase of ``text`` counts from ``moment`` ("gestern", "yesterday",
        "vor 3 Tagen", "先週": a week before), in the owner's language or English.

        None when the text names none, or when no ``locale`` is set (as before it was).
        """
        languages = languages_for(text, self.locale, english=True)
        if not languages:
            return None
        spoken = find_date(text, self.localize(moment), languages, relative=True)
        return spoken.moment.date() if spoken is not None else None


_RELATIVE = {"today": 0, "tomorrow": 1, "yesterday": -1}
_OFFSET = re.compile(r"\+?(\d{1,4})\s*([dw])")


def parse_date(text: str, today: date) -> date:
    """A calendar day from ``YYYY-MM-DD``, ``today``/``tomorrow``/``yesterday`` or ``+3d``/``+2w``.

    Raises ValueError with a sentence a person can act on.
    """
    value = text.strip().lower()
    if value in _RELATIVE:
        return today + timedelta(days=_RELATIVE[value])
    offset = _OFFSET.fullmatch(value)
    if offset:
        return today + timedelta(days=int(offset.group(1)) * (7 if offset.group(2) == "w" else 1))
    try:
        return date.fromisoformat(value)
    except ValueError:
        pass
    try:
        return datetime.fromisoformat(value).date()
    except ValueError:
        raise ValueError(
            f"{text!r} is not a date; use YYYY-MM-DD, today, tomorrow or +3d."
        ) from None
