"""What kind of image a downloaded screenshot is, from its first bytes.

Plex is given only JPEG, PNG or WebP. Stash answers a scene without a cover with its
default image, an SVG, and 200 [S:internal/static/embed.go `DefaultSceneImage`]; a
proxy or login portal in front of Stash answers an HTML page with 200. Neither is a
poster. The file's own magic bytes decide, not the Content-Type header.
"""

from __future__ import annotations

JPEG, PNG, WEBP, SVG = "jpeg", "png", "webp", "svg"
POSTER_KINDS = (JPEG, PNG, WEBP)


def image_kind(data: bytes) -> str | None:
    """``jpeg``/``png``/``webp``/``svg``, or None for anything else.

    >>> image_kind(b"\\xff\\xd8\\xff\\xe0rest"), image_kind(b"RIFF\\x10\\x00\\x00\\x00WEBPVP8 ")
    ('jpeg', 'webp')
    >>> image_kind(b"<!DOCTYPE html><html>") is None
    True
    """
    if data.startswith(b"\xff\xd8\xff"):
        return JPEG
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        return PNG
    if len(data) >= 12 and data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return WEBP
    head = data[:512].lstrip().lower()
    if head.startswith(b"<svg") or (head.startswith(b"<?xml") and b"<svg" in head):
        return SVG
    return None
