"""Where Plex fetches performer photos from (``performer_photos``), decided once per run.

Plex takes an actor's photo only as a URL it fetches itself, and stores and shows that URL:
no credential may ever be part of it. So when Stash asks for a login, no photo is written
(unless ``performer_photo_base_url`` names an address the user vouches for), and the user is
told once where they look: Stash's log (when the situation is new; from the drainer, by the next
hook), Health check and the page's status (``sync_health.json``'s ``performer_photos``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from core.log import StashLog
    from stash.client import StashClient
    from sync_queue.health import HealthFile
    from validation.config import Settings

HEALTH_KEY = "performer_photos"
LOGIN_NEEDED = (
    "performer photos are not written: Stash asks for a login, and Plex fetches each photo by its URL "
    "without one (an API key or session in a URL would be stored and shown by Plex)"
)
LOGIN_FIX = (
    "set performer_photo_base_url (Performer photo address) to an address that serves Stash's performer "
    "images to Plex without a login on your network (e.g. a reverse proxy allowing /performer/*/image), "
    "or turn performer_photos off"
)


def decide(settings: Settings, stash: StashClient) -> tuple[str | None, dict | None]:
    """(the base of every photo URL or None for no photos, the problem to tell or None)."""
    if not settings.performer_photos:
        return None, None
    if settings.performer_photo_base_url:
        return settings.performer_photo_base_url, None  # the user vouches for it
    if stash.needs_login():
        return None, {"reason": LOGIN_NEEDED, "fix": LOGIN_FIX}
    return stash.own_base, None


def photo_base(
    settings: Settings, stash: StashClient, health: HealthFile, log: StashLog, log_read: bool = True
) -> str | None:
    """``decide``'s base; its problem recorded in the health file, and logged when it was
    not recorded already (once, not on every run). ``log_read``: the user reads this run's
    log (a task's, the command line's); the drainer's is a file, so the next hook says it in
    Stash's log (``told`` false: sync_queue/health.py ``notice_due``)."""
    base, problem = decide(settings, stash)
    recorded = health.state().get(HEALTH_KEY)
    known = {k: v for k, v in recorded.items() if k != "told"} if isinstance(recorded, dict) else recorded
    if known != problem:
        health.update(**{HEALTH_KEY: None if problem is None else {**problem, "told": log_read}})
        if problem is not None:
            log.warning(f"{problem['reason']}; {problem['fix']}")
    return base


def photo_notice(state: dict) -> dict | None:
    """The notice ``photo_base`` recorded in the health file (``reason``, ``fix``), or None."""
    notice = state.get(HEALTH_KEY)
    return notice if isinstance(notice, dict) and notice.get("reason") else None
