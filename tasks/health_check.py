"""``health_check``: can Stash2Plex reach both servers, and does path_map fit the files?

In order: Stash (version, settings, old names taken over or ignored, whether a ``watch``
runs for the settings that need one), Plex (where plex_url leads, version, token), the
libraries, then ``SAMPLE_SIZE`` scenes' files mapped with ``path_map`` and looked up in
Plex's index (under half found: a rule is suggested, plex/suggest.py), then every scene
matched as the sync matches it (the unmatched counted, with the command that lists them).
A failed check is never an error reply: ``ok: false`` and ``problems`` say what to fix.
"""

from __future__ import annotations

from typing import Any

from core.errors import ConfigError, PlexAuthError, PlexUnavailable, Stash2PlexError, StashUnavailable
from core.log import StashLog
from plex.index import VIDEO_SECTION_TYPES, missing_sections, pick_sections
from plex.matcher import CHOOSE
from plex.suggest import suggest_rule, unsettled
from tasks.context import Context
from validation.config import Settings
from worker.breaker import plex_answered
from worker.watching import watch_report

SAMPLE_SIZE = 200
LOW_SHARE = 0.5
EXAMPLES = 5


class _Report:
    """The reply's dict plus readable log lines; every problem also turns ``ok`` off."""

    def __init__(self, log: StashLog) -> None:
        self.log = log
        self.data: dict[str, Any] = {"ok": True, "problems": []}

    def good(self, message: str) -> None:
        self.log.report(message)

    def bad(self, message: str) -> None:
        self.data["ok"] = False
        self.data["problems"].append(message)
        self.log.report(message, "warning")


def run(app: Context) -> dict[str, Any]:
    report = _Report(app.log)
    settings = _check_stash(app, report)
    if settings is not None and _check_plex(app, report):
        _check_notifications(app, report)
        if _check_libraries(app, settings, report):
            _check_path_map(app, settings, report)
            _count_unmatched(app, report)
    verdict = "all checks passed" if report.data["ok"] else f"{len(report.data['problems'])} problem(s) found"
    app.log.report(f"health check: {verdict}", "info" if report.data["ok"] else "warning")
    return report.data


# -- Stash --------------------------------------------------------------------------
def _check_stash(app: Context, report: _Report) -> Settings | None:
    """Stash's version and the plugin settings; the settings, or None when unusable."""
    info: dict[str, Any] = {"reachable": False, "version": None}
    report.data["stash"] = info
    try:
        info["version"] = app.stash().version()
        info["reachable"] = True
        report.good(f"Stash is reachable (version {info['version']})")
        settings = app.settings()
    except ConfigError as exc:  # before the version was read: a Stash too old (stash/releases.py)
        report.bad(str(exc) if info["version"] is None else f"the plugin settings are not usable: {exc}")
        return None
    except Stash2PlexError as exc:
        report.bad(f"Stash {'is not reachable' if isinstance(exc, StashUnavailable) else 'check failed'}: {exc}")
        return None
    _report_settings(settings, report)
    _check_watch(app, settings, report)
    _check_tag_names(app, settings, report)
    _check_notify_urls(settings, report)
    _check_photos(app, settings, report)
    return settings


def _check_photos(app: Context, settings: Settings, report: _Report) -> None:
    """Whether performer photos are written, and from where Plex fetches them."""
    from worker.photos import decide

    if not settings.performer_photos:
        return
    try:
        base, problem = decide(settings, app.stash())
    except Stash2PlexError as exc:
        report.bad(f"performer photos not checked: {exc}")
        return
    report.data["performer_photos"] = {"base": base, "problem": problem}
    if problem is not None:
        report.bad(f"{problem['reason']}; {problem['fix']}")
    else:
        report.good(f"performer photos: Plex fetches them from {base}/performer/<id>/image (without a login)")


def _check_watch(app: Context, settings: Settings, report: _Report) -> None:
    """Whether a ``watch`` runs: plays, resume points and ratings come back only through one."""
    state = watch_report(app.watch_state(), settings)
    report.data["watch"] = state
    (report.bad if state["problem"] else report.good)(state["message"])


def _check_notify_urls(settings: Settings, report: _Report) -> None:
    """Whether Apprise can use each notification URL (named by position and host only)."""
    from core.notify import service, unusable

    for position, url in enumerate(settings.notify_urls, 1):
        if service(url) is None:
            report.bad(f"setting notify_urls: {unusable(position, url)}")


def _report_settings(settings: Settings, report: _Report) -> None:
    """The effective configuration, and what became of settings saved under old names."""
    report.data["settings"] = settings.summary()
    report.data["old_settings"] = settings.adopted.summary()
    for problem in settings.problems:  # a bad optional value: its feature is off, scenes still sync
        report.bad(problem)
    for line in settings.adopted.taken_over:
        report.good(f"old setting taken over: {line}")
    if settings.adopted.ignored:
        report.good(f"old settings ignored: {', '.join(settings.adopted.ignored)}")


def _check_tag_names(app: Context, settings: Settings, report: _Report) -> None:
    """A tag filter naming a tag Stash does not have filters nothing: most likely a typo."""
    if not (settings.skip_tags or settings.hide_tags):
        return
    try:
        known = {name.casefold() for name in app.stash().tag_parents()}
    except Stash2PlexError as exc:
        report.bad(f"tag filters not checked: {exc}")
        return
    for setting in ("skip_tags", "hide_tags"):
        missing = [n for n in getattr(settings, setting) if n.casefold() not in known]
        if missing:
            report.bad(f"setting {setting} names {', '.join(repr(n) for n in missing)}, which Stash does not have")


# -- Plex ---------------------------------------------------------------------------
def _check_plex(app: Context, report: _Report) -> bool:
    info: dict[str, Any] = {"reachable": False, "version": None, "token_accepted": None}
    report.data["plex"] = info
    try:
        info["version"] = app.plex().version()
    except PlexAuthError as exc:
        info.update(reachable=True, token_accepted=False)
        report.bad(f"Plex token rejected: {exc}")
        return False
    except Stash2PlexError as exc:
        report.bad(f"Plex {'is not reachable' if isinstance(exc, PlexUnavailable) else 'check failed'}: {exc}")
        return False
    plex = app.plex()
    info.update(reachable=True, token_accepted=True, url=plex.base_url)
    report.good(f"Plex is reachable (version {info['version']}) and accepts the token")
    if plex.redirected:
        report.good(
            f"plex_url {plex.url} redirects to {plex.base_url}: Stash2Plex follows it once when it connects and "
            "sends every request there (a write answered with a redirect is never taken as done); "
            "set plex_url to that address to skip the redirect"
        )
    plex_answered(app.breaker, app.log)
    return True


def _check_notifications(app: Context, report: _Report) -> None:
    """Whether Plex's notification websocket opens (the listener's connection)."""
    from plex.notifications import probe

    try:
        probe(app.plex())
    except Stash2PlexError as exc:
        report.data["plex"]["notifications"] = False
        report.bad(
            f"Plex's notifications cannot be read: {exc}. New files then wait for timed retries "
            "(a proxy in front of Plex must pass websockets through)"
        )
        return
    report.data["plex"]["notifications"] = True
    report.good("Plex's notification websocket connects (new items are synced as Plex adds them)")


def _check_libraries(app: Context, settings: Settings, report: _Report) -> bool:
    """Configured libraries found in Plex, and video libraries not configured."""
    try:
        available = app.plex().sections()
    except Stash2PlexError as exc:
        report.bad(f"cannot list the Plex libraries: {exc}")
        return False
    videos = [s.title for s in available if s.type in VIDEO_SECTION_TYPES]
    info: dict[str, Any] = {
        "available": [s.title for s in available],
        "configured": [],
        "missing": [],
        "not_configured": [],
    }
    report.data["libraries"] = info
    try:
        chosen = pick_sections(available, settings.plex_libraries)
    except ConfigError as exc:
        info["missing"] = missing_sections(available, settings.plex_libraries)
        report.bad(str(exc))
        return False
    info["configured"] = [s.title for s in chosen]
    info["not_configured"] = [t for t in videos if t not in info["configured"]]
    if not chosen:
        report.bad(
            "Plex has no movie/video library to sync into; create one (type 'Other Videos') or set plex_libraries"
        )
        return False
    scope = "" if settings.plex_libraries else " (all video libraries, since plex_libraries is empty)"
    report.good(f"Plex libraries synced: {', '.join(info['configured'])}{scope}")
    if info["not_configured"]:
        report.good(f"video libraries not in plex_libraries (not synced): {', '.join(info['not_configured'])}")
    return True


# -- scenes without a Plex item -----------------------------------------------------
def _count_unmatched(app: Context, report: _Report) -> None:
    from worker.unmatched import COMMAND, find_unmatched

    try:
        count = len(find_unmatched(app.settings(), app.index().index(), app.stash()))
    except Stash2PlexError as exc:
        report.bad(f"scenes without a Plex item not counted: {exc}")
        return
    report.data["unmatched"] = {"count": count, "list_with": COMMAND}
    if count:
        report.good(
            f"{count:,} scenes have no Plex item; '{COMMAND}' lists them by folder, with a path_map rule when "
            f"several agree; for a scene several Plex items fit, {CHOOSE}"
        )
    else:
        report.good("every scene has a Plex item")


# -- the path map -------------------------------------------------------------------
def _check_path_map(app: Context, settings: Settings, report: _Report) -> None:
    paths = settings.path_map
    try:
        _, scenes = app.stash().scenes_after(0, SAMPLE_SIZE)
        index = app.index().index()
    except Stash2PlexError as exc:
        report.bad(f"path map not checked: {exc}")
        return
    primaries = [str(files[0]["path"]) for s in scenes if (files := s.get("files")) and files[0].get("path")]
    unmatched = [(p, paths.map(p)) for p in primaries if not index.by_path(paths.map(p))]
    matched = len(primaries) - len(unmatched)
    share = matched / len(primaries) if primaries else None
    info: dict[str, Any] = {
        "rules": str(paths),
        "sampled": len(primaries),
        "matched": matched,
        "share": None if share is None else round(share, 3),
        "unmatched_examples": [{"stash_path": s, "mapped_path": m} for s, m in unmatched[:EXAMPLES]],
        "suggested_path_map": None,
    }
    report.data["path_map"] = info
    if share is None:
        report.good("path map not checked: Stash has no scenes with files")
        return
    summary = f"path map: {matched} of {len(primaries)} sampled scenes ({share:.0%}) are found in Plex by exact path"
    if share >= LOW_SHARE:
        report.good(summary)
    else:
        found = suggest_rule(unsettled(scenes), index)
        info["suggested_path_map"] = found.rule if found else None
        hint = (
            f"; Plex has files of the same names, and path_map '{found.rule}' would match "
            f"{len(found.matches)} of them exactly, each to the one Plex item of its file name"
            if found
            else "; no path_map rule is suggested (it takes at least two scenes whose file name exactly one "
            "Plex item holds): has Plex scanned these files, and are the right libraries configured?"
        )
        report.bad(summary + hint)
    for stash_path, mapped in unmatched[:EXAMPLES]:
        report.log.report(f"not in Plex: {stash_path} → {mapped}")
