"""A scene's cover as its Plex item's poster: read ahead of the sync, compared by SHA-1 with the
one last uploaded, uploaded (``PosterNotUpdated``: the fields are written, the poster is
retried); Plex's own poster back when ours must go."""

from __future__ import annotations

import contextlib
import hashlib
import threading
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, NamedTuple

from core.errors import SlowDownload, Stash2PlexError, TransientError
from worker.images import POSTER_KINDS, SVG, image_kind
from worker.settle import not_the_jobs

if TYPE_CHECKING:
    from plex.client import PlexClient
    from stash.client import StashClient
    from sync_queue.ledger import Ledger, SceneRecord
    from validation.config import Settings
    from validation.metadata import SceneMetadata


class Cover(NamedTuple):
    """A poster decision (``Posters._decide``) and the cover read for it."""

    outcome: str
    image: bytes = b""
    content_type: str = ""
    digest: str = ""


class PosterNotUpdated(TransientError):
    """The metadata is written, the poster is not: the job is retried for the poster."""


class Posters:
    def __init__(self, client: PlexClient, stash: StashClient, ledger: Ledger, settings: Settings) -> None:
        self.client, self.stash, self.ledger, self.settings = client, stash, ledger, settings
        self._cover = threading.local()  # the cover this thread read ahead: (url, bytes, Content-Type)

    @contextlib.contextmanager
    def cover_read_ahead(self, scene: SceneMetadata, record: SceneRecord | None) -> Iterator[None]:
        """Read the scene's cover from Stash now, for this thread's next ``sync`` of it: the
        pipeline calls this before a sync takes a Plex slot, so the slot is spent on Plex, not
        on Stash. A failed read is left to the sync (it reads again and reports it); the bytes
        are dropped when the block ends, used or not."""
        url = scene.screenshot if self.settings.writes("poster") else None
        if url and (record is None or url != record.poster_source):
            try:
                self._cover.read = (url, *self.stash.image(url))
            except SlowDownload as exc:  # read again, it would take as long: the sync reports it
                self._cover.read = (url, exc, "")
            except Stash2PlexError:
                pass
        try:
            yield
        finally:
            self._cover.read = None

    def _cover_image(self, url: str) -> tuple[bytes, str]:
        read = getattr(self._cover, "read", None)
        if read is not None and read[0] == url:
            self._cover.read = None
            if isinstance(read[1], SlowDownload):
                raise read[1]
            return read[1], read[2]
        return self.stash.image(url)

    def verdict(self, scene: SceneMetadata, record: SceneRecord | None, rating_key: int) -> str:
        """What ``write`` would do to the item, without writing (the screenshot is read to compare
        its bytes): none | unchanged | upload | restore | failed."""
        try:
            return self._decide(scene, record, rating_key, self.stash.image).outcome
        except Stash2PlexError:
            return "failed"

    def _decide(
        self,
        scene: SceneMetadata,
        record: SceneRecord | None,
        rating_key: int,
        read: Callable[[str], tuple[bytes, str]],
    ) -> Cover:
        """The one poster decision of a write and of its preview; ``read`` reads the cover.
        none: posters are not written, or the scene has no cover (no screenshot, or Stash's default
        image for one without) and the item keeps the poster it shows | unchanged: the cover last
        uploaded (its URL, or its SHA-1) | upload | restore: no cover, and the item shows one
        Stash2Plex uploaded for another scene (it changed owner): Plex's own comes back |
        failed: not a JPEG, PNG or WebP image."""
        url = scene.screenshot
        if not self.settings.writes("poster"):
            return Cover("none")
        if url and record is not None and url == record.poster_source:
            return Cover("unchanged")
        if url:
            image, content_type = read(url)
            kind = image_kind(image)
            if kind in POSTER_KINDS:
                digest = hashlib.sha1(image).hexdigest()
                known = record is not None and digest == record.poster_hash
                return Cover("unchanged" if known else "upload", image, content_type, digest)
            if kind != SVG:
                return Cover("failed", image, content_type)
        uploaded = self.ledger.item_poster(rating_key)
        if uploaded is None or uploaded[0] == scene.id:
            return Cover("none")  # nothing of ours, or the scene's own earlier cover (kept, as before)
        if self._shown(rating_key, uploaded[1]) is None:
            return Cover("none", digest=uploaded[1])  # another poster was chosen in Plex since: it stays
        return Cover("restore", digest=uploaded[1])

    def _shown(self, rating_key: int, digest: str) -> list[tuple[str, bool]] | None:
        """The item's posters while it shows the one Stash2Plex uploaded (``upload://posters/<SHA-1
        of the bytes>``, ``digest``); None once another was chosen in Plex."""
        posters = self.client.posters(rating_key)
        shown = next((key for key, selected in posters if selected), None)
        return posters if shown == f"upload://posters/{digest}" else None

    def restore(self, rating_key: int, digest: str) -> None:
        """Plex's own poster back on the item, when it shows the one Stash2Plex uploaded
        (``upload://posters/<SHA-1 of the bytes>``, ``digest``); another poster chosen in Plex
        since stays. Plex's own is the first of the item's posters held on the server that is
        not an upload (a frame of the video, ``media://``, or an agent's or a local file's,
        ``metadata://``), else the first an agent offers from the web; then the poster is
        unlocked, as plexapi's own tests leave an item after choosing its default image
        again (tests/test_mixins.py ``_test_mixins_edit_image``), so Plex may choose anew
        at a refresh (with none of its own listed, only the lock is released). A poster the
        user uploaded before ours is not chosen again: which one showed before is not kept."""
        posters = self._shown(rating_key, digest)
        if posters is None:
            return  # another poster was chosen in Plex since: it stays
        theirs = [key for key, _ in posters if not key.startswith("upload://")]
        own = next((key for key in theirs if key.startswith(("media://", "metadata://"))), None)
        if theirs:
            self.client.select_poster(rating_key, own or theirs[0])
        self.client.edit(rating_key, {"thumb.locked": 0})

    def write(self, scene: SceneMetadata, record: SceneRecord) -> str:
        """uploaded | unchanged | none (no cover in Stash: Plex keeps the poster it shows) |
        restored (no cover, and the item showed another scene's upload: Plex's own is back).
        Raises PosterNotUpdated when the image could not be fetched, checked or uploaded; an
        error that holds or postpones every job (a refused Stash session, Plex down) is raised
        as it is, so the job keeps its retry budget (worker/settle.py ``not_the_jobs``)."""
        assert record.rating_key is not None
        try:
            cover = self._decide(scene, record, record.rating_key, self._cover_image)
            if cover.outcome == "failed":
                raise PosterNotUpdated(
                    f"Stash answered the screenshot with {cover.content_type.split(';')[0] or 'unknown data'}, not a "
                    "JPEG, PNG or WebP image (is a proxy or login page in front of Stash?)"
                )
            if cover.outcome == "upload":
                self.client.upload_poster(record.rating_key, cover.image)
                record.poster_hash = cover.digest
            elif cover.outcome == "restore":
                self.restore(record.rating_key, cover.digest)
            if cover.outcome in ("restore", "none") and cover.digest:  # no upload of ours shows any more
                self.ledger.forget_poster(record.rating_key)
        except PosterNotUpdated:
            raise
        except Stash2PlexError as exc:
            if not_the_jobs(exc):
                raise
            raise PosterNotUpdated(
                f"poster not updated ({exc}); the fields are written and the poster is retried"
            ) from None
        if scene.screenshot and self.settings.writes("poster"):
            record.poster_source = scene.screenshot
        return {"upload": "uploaded", "restore": "restored"}.get(cover.outcome, cover.outcome)
