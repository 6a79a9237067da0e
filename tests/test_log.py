"""core/log.py: the exact bytes Stash's stderr reader gets, and the redactor."""

from __future__ import annotations

import io
import logging
import re

import pytest

from core.log import MAX_LINE_BYTES, Redactor, StashLog, capture_library_logs, first_ids, shortened

STASH_LINE_LIMIT = (
    64 * 1024
)  # bufio.Scanner's default token size: Stash reads plugin stderr with one (pkg/plugin/common/log/log.go)


def _log(**kw) -> tuple[StashLog, io.BytesIO]:
    raw = io.BytesIO()
    stream = io.TextIOWrapper(raw, encoding="utf-8", newline="\n", write_through=True)
    return StashLog(stream, **kw), raw


@pytest.mark.parametrize(
    ("level", "code"), [("trace", b"t"), ("debug", b"d"), ("info", b"i"), ("warning", b"w"), ("error", b"e")]
)
def test_each_level_has_its_prefix_byte(level, code):
    log, raw = _log()
    log.log(level, "hello")
    assert raw.getvalue() == b"\x01" + code + b"\x02hello\n"


def test_a_non_string_message_is_written_as_str():
    log, raw = _log()
    log.info({"pending": 3})
    assert raw.getvalue() == b"\x01i\x02{'pending': 3}\n"


@pytest.mark.parametrize(
    ("fraction", "written"),
    [
        (0.42, b"0.4200"),
        (0, b"0.0000"),
        (1, b"1.0000"),
        (0.123456, b"0.1235"),
        (-0.5, b"0.0000"),
        (1.7, b"1.0000"),
        (float("inf"), b"1.0000"),
        (float("-inf"), b"0.0000"),
    ],
)
def test_progress_is_a_four_decimal_fraction_clamped_to_0_1(fraction, written):
    log, raw = _log()
    log.progress(fraction)
    assert raw.getvalue() == b"\x01p\x02" + written + b"\n"


def test_multi_line_message_gives_one_prefixed_line_each_and_drops_blank_lines():
    log, raw = _log()
    log.error("first\nsecond\r\n\n   \nthird")
    assert raw.getvalue() == b"\x01e\x02first\n\x01e\x02second\n\x01e\x02third\n"


def test_an_empty_message_still_writes_one_valid_line():
    log, raw = _log()
    log.warning("")
    assert raw.getvalue() == b"\x01w\x02(empty message)\n"


@pytest.mark.parametrize("unit", ["x", "é", "日", "😀"])
def test_a_200_kb_message_is_cut_below_stash_line_limit(unit):
    log, raw = _log()
    message = unit * (200_000 // len(unit.encode()))
    log.info(message + "\nafter")
    lines = raw.getvalue().split(b"\n")
    assert lines[-1] == b""
    assert lines[-2] == b"\x01i\x02after"
    first = lines[0]
    assert first.startswith(b"\x01i\x02")
    assert len(first) + 1 < STASH_LINE_LIMIT  # with its newline
    assert len(first) > MAX_LINE_BYTES // 2  # cut, not dropped
    text = first[3:].decode("utf-8")  # strict: no multi-byte character was split
    assert text.startswith(unit * 100)
    assert re.search(r"\[cut, \d+ bytes\]$", text)


def test_every_line_of_a_huge_multi_line_message_is_cut():
    log, raw = _log()
    log.debug(("ä" * 50_000 + "\n") * 3)
    lines = raw.getvalue().split(b"\n")[:-1]
    assert len(lines) == 3
    assert all(line.startswith(b"\x01d\x02") and len(line) + 1 < STASH_LINE_LIMIT for line in lines)


def test_registered_secrets_are_redacted_in_every_level():
    redactor = Redactor()
    redactor.add("plexTOKEN-abc123")
    log, raw = _log(redactor=redactor)
    log.info("GET /library?X-Plex-Token=plexTOKEN-abc123 failed")
    log.error("token plexTOKEN-abc123\nagain plexTOKEN-abc123")
    assert raw.getvalue() == (
        b"\x01i\x02GET /library?X-Plex-Token=*** failed\n\x01e\x02token ***\n\x01e\x02again ***\n"
    )


def test_a_secret_containing_another_is_redacted_whole():
    redactor = Redactor()
    redactor.add("abcd")  # registered first, and contained in the longer one
    redactor.add("xxabcdyy")
    assert redactor("cookie=xxabcdyy short=abcd") == "cookie=*** short=***"
    other = Redactor()
    other.add("xxabcdyy")
    other.add("abcd")
    assert other("xxabcdyy abcd") == "*** ***"


def test_redactor_ignores_empty_and_tiny_values():
    redactor = Redactor()
    redactor.add(None)
    redactor.add("")
    redactor.add("ab")  # would redact half the log
    assert redactor("a b ab abc") == "a b ab abc"


def test_log_redact_is_the_shared_redactor():
    log, raw = _log()
    log.redact.add("s3cr3t-cookie")
    assert log.redact("x s3cr3t-cookie") == "x ***"
    log.info("value s3cr3t-cookie")
    assert b"s3cr3t" not in raw.getvalue()


class _BrokenPipe(io.StringIO):
    def __init__(self) -> None:
        super().__init__()
        self.writes = 0

    def write(self, text: str) -> int:
        self.writes += 1
        raise BrokenPipeError(32, "Broken pipe")


def test_a_broken_pipe_never_raises_and_stops_further_writes():
    stream = _BrokenPipe()
    log = StashLog(stream)
    log.error("Stash closed its end")
    log.info("still fine")
    log.progress(0.5)
    assert log.broken
    assert stream.writes == 1


def test_a_closed_stream_never_raises():
    stream = io.StringIO()
    stream.close()
    log = StashLog(stream)
    log.info("late")
    assert log.broken


def test_an_unencodable_character_does_not_silence_the_log():
    ascii_raw = io.BytesIO()
    log = StashLog(io.TextIOWrapper(ascii_raw, encoding="ascii", write_through=True))
    log.info("café")
    log.info("next")
    assert ascii_raw.getvalue() == b"\x01i\x02caf\\xe9\n\x01i\x02next\n"
    assert not log.broken
    log, raw = _log()
    log.info("file /m/\udcff.mp4")  # an undecodable file name byte
    assert raw.getvalue() == b"\x01i\x02file /m/\\udcff.mp4\n"


def test_plain_mode_writes_timestamped_lines_and_no_progress():
    redactor = Redactor()
    redactor.add("tok-123456")
    log, raw = _log(redactor=redactor, plain=True)
    log.warning("one tok-123456\ntwo")
    log.progress(0.5)
    text = raw.getvalue().decode()
    assert "\x01" not in text and "\x02" not in text
    lines = text.splitlines()
    assert len(lines) == 2
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d WARNING one \*\*\*", lines[0])
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d WARNING two", lines[1])


@pytest.fixture
def plexapi_logger():
    logger = logging.getLogger("plexapi")
    saved = (logger.handlers[:], logger.propagate, logger.level)
    yield logger
    logger.handlers, logger.propagate, logger.level = saved[0], saved[1], saved[2]


def test_capture_library_logs_routes_plexapi_records_through_the_redactor_at_debug(plexapi_logger):
    redactor = Redactor()
    redactor.add("plexTOKEN-zz99")
    log, raw = _log(redactor=redactor)
    capture_library_logs(log, names=("plexapi",))
    plexapi_logger.setLevel(logging.DEBUG)
    plexapi_logger.warning("request to %s failed", "http://plex:32400/?X-Plex-Token=plexTOKEN-zz99")
    plexapi_logger.error("boom\nsecond line")
    plexapi_logger.debug("below the handler's INFO level")
    assert raw.getvalue() == (
        b"\x01d\x02[plexapi] warning: request to http://plex:32400/?X-Plex-Token=*** failed\n"
        b"\x01d\x02[plexapi] error: boom\n\x01d\x02second line\n"
    )
    assert plexapi_logger.propagate is False


def test_capture_library_logs_survives_a_bad_format_string(plexapi_logger):
    log, raw = _log()
    capture_library_logs(log, names=("plexapi",))
    plexapi_logger.setLevel(logging.INFO)
    plexapi_logger.info("%d items", "not a number")
    assert raw.getvalue() == b"\x01d\x02[plexapi] info: '%d items'\n"


def test_url_encoded_forms_of_a_secret_are_redacted_too():
    from core.log import Redactor

    redact = Redactor()
    redact.add("abc/def=+ghi")
    text = "plain abc/def=+ghi, quoted abc%2Fdef%3D%2Bghi, form abc%2Fdef%3D%2Bghi"
    assert redact(text) == "plain ***, quoted ***, form ***"


def test_drainer_log_is_rotated_past_its_limit(tmp_path):
    from app.root import rotate

    log = tmp_path / "drainer.log"
    log.write_bytes(b"x" * 100)
    rotate(log, 100)
    assert log.read_bytes() == b"x" * 100  # at the limit: kept
    log.write_bytes(b"y" * 101)
    (tmp_path / "drainer.log.1").write_bytes(b"older")
    rotate(log, 100)
    assert not log.exists() and (tmp_path / "drainer.log.1").read_bytes() == b"y" * 101  # one older copy
    rotate(tmp_path / "absent.log", 100)  # nothing to rotate: no error


def test_shortened_keeps_a_short_text_and_cuts_a_long_one_to_the_limit_never_inside_a_character():
    assert shortened("abcd", 4) == "abcd"
    assert shortened("abcdef", 4) == "abc…"
    assert shortened("ab cdef", 4) == "ab…"  # no space before the ellipsis
    assert shortened("abe\u0301fg", 5) == "abe…"  # the accent is not left without its letter


def test_first_ids_mark_that_there_are_more():
    assert first_ids([3, 4], 2) == "3, 4"
    assert first_ids([3, 4], 9) == "3, 4, …"
