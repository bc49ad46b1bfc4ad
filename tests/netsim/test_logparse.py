"""Parser tests: each format, malformed lines, '-' sizes, gzip and chunked reading."""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from netsim.logparse import (
    COLUMNS,
    FORMATS,
    LogFormat,
    LogFormatError,
    iter_log,
    open_text,
    parse_lines,
    read_log,
    sniff_format,
)
from testbed.traces.catalogue import bundled_dir

EPA = bundled_dir() / "EPA-HTTP" / "epa-http.txt.gz"
WC98 = bundled_dir() / "WorldCup98-day6-sample" / "wc_day6_1_sample.csv.gz"
SDSC = bundled_dir() / "SDSC-HTTP" / "sdsc-http.txt.gz"


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="latin-1")
    return path

CLF_LINES = [
    'h1 - - [01/Jul/1995:00:00:01 -0400] "GET /history/apollo/ HTTP/1.0" 200 6245',
    'h2 - frank [01/Jul/1995:00:00:06 -0400] "GET /shuttle/countdown/ HTTP/1.0" 200 3985',
    'h3 - - [01/Jul/1995:00:00:09 -0400] "GET /images/a.gif HTTP/1.0" 304 0',
    'h4 - - [01/Jul/1995:00:00:11 -0400] "GET /missing.html HTTP/1.0" 404 -',
    'h5 - - [01/Jul/1995:00:00:12 -0400] "POST /cgi-bin/x HTTP/1.0" 200 12 "http://r/" "Moz"',
]


def test_clf_fields() -> None:
    table, rep = parse_lines(CLF_LINES, "clf")
    assert rep.lines == 5 and rep.parsed == 5 and rep.malformed == 0
    assert table["method"].tolist() == ["GET", "GET", "GET", "GET", "POST"]
    assert table["url"].tolist()[:2] == ["/history/apollo/", "/shuttle/countdown/"]
    assert table["status"].tolist() == [200, 200, 304, 404, 200]
    assert table["size"].tolist() == [6245, 3985, 0, -1, 12]
    # local wall clock as written: 1995-07-01 00:00:01
    assert table["time"].iloc[0] == int(pd.Timestamp("1995-07-01 00:00:01").timestamp())
    assert table["time"].iloc[1] - table["time"].iloc[0] == 5
    assert (table["utc_offset"] == -4 * 3600).all()


def test_timezones() -> None:
    lines = ['h - - [01/Jul/1995:00:00:01 +0530] "GET / HTTP/1.0" 200 1',
             'h - - [01/Jul/1995:00:00:01] "GET / HTTP/1.0" 200 1']
    table, _ = parse_lines(lines, LogFormat("clf", utc_offset=3600))
    assert table["utc_offset"].tolist() == [5 * 3600 + 1800, 3600]
    utc = table["time"] - table["utc_offset"]
    assert pd.Timestamp(utc.iloc[0], unit="s") == pd.Timestamp("1995-06-30 18:30:01")


def test_malformed_lines_are_counted_not_fatal() -> None:
    lines = CLF_LINES[:2] + ["garbage", 'h [99/Foo/1995:00:00:00 -0400] "GET / HTTP/1.0" 200 1',
                             "", CLF_LINES[2]]
    table, rep = parse_lines(lines, "clf", first_line=10)
    assert rep.lines == 5          # the empty line is not counted
    assert rep.parsed == 3 and rep.malformed == 2
    assert [n for n, _ in rep.examples] == [12, 13]
    assert len(table) == 3
    assert "malformed" in str(rep)


def test_epa_format_and_missing_size() -> None:
    lines = ['a.b [29:23:53:25] "GET /Software.html HTTP/1.0" 200 1497',
             'c [30:09:36:04] "GET /enviro/gif/x.gifalt= HTTP/1.0" 404',
             'd [30:00:00:01] "GET /a b c.html HTTP/1.0" 200 5']
    table, rep = parse_lines(lines, LogFormat("epa", year=1995, month=8))
    assert rep.malformed == 0
    assert table["size"].tolist() == [1497, -1, 5]
    assert table["url"].tolist()[2] == "/a b c.html"
    assert pd.Timestamp(table["time"].iloc[0], unit="s") == pd.Timestamp("1995-08-29 23:53:25")


def test_wc98csv_lpdaac_sdsc() -> None:
    t, r = parse_lines(["1044,30/Apr/1998,22:46:12,/images/11104.gif,200,508",
                        "7,01/May/1998,00:00:01,/x,-,-"], "wc98csv")
    assert r.malformed == 0 and t["status"].tolist() == [200, -1] and t["size"].tolist() == [508, -1]
    line = ("2015-02-15 05:11PM|&|0b3a|&|ASTGTM|&|2|&|7202|&|12974403|&|/opendap/a.nc?crs,lat"
            "|&|200|&|57752|&|extra")
    t, r = parse_lines([line], "lpdaac")
    assert r.malformed == 0 and t["url"].iloc[0] == "/opendap/a.nc?crs,lat"
    assert pd.Timestamp(t["time"].iloc[0], unit="s") == pd.Timestamp("2015-02-15 17:11")
    t, r = parse_lines(["UNR a.b: Tue Aug 22 00:22:32 1995 (): No match for selector: GET /s.mov"
                        " HTTP/1.0", "1+1: Tue Aug  2 00:00:00 1995 (/f.gif): Sent binary: GET "
                        "/f.gif HTTP/1.0"], "sdsc")
    assert r.malformed == 0 and t["url"].tolist() == ["/s.mov", "/f.gif"]
    assert (t["status"] == -1).all() and (t["size"] == -1).all()


def test_sniff_format() -> None:
    assert sniff_format(CLF_LINES) == "clf"
    assert sniff_format(["1,30/Apr/1998,22:46:12,/x,200,5"]) == "wc98csv"
    with pytest.raises(LogFormatError):
        sniff_format(["hello world", "not a log"])
    with pytest.raises(ValueError, match="unknown log format"):
        LogFormat("apache-json")


def test_gzip_equals_plain_and_chunked_equals_whole(tmp_path: Path) -> None:
    text = "\n".join(CLF_LINES * 7 + ["junk line"] + CLF_LINES * 3) + "\n"
    plain = write(tmp_path / "a.log", text)
    gz = tmp_path / "renamed.log"       # gzip detected by magic bytes, not by name
    gz.write_bytes(gzip.compress(text.encode()))
    whole, rep_whole = read_log(plain)
    zipped, rep_gz = read_log(gz)
    chunked, rep_chunked = read_log(plain, chunk_lines=4)
    pd.testing.assert_frame_equal(whole, zipped)
    pd.testing.assert_frame_equal(whole, chunked)
    assert rep_whole.malformed == rep_chunked.malformed == rep_gz.malformed == 1
    assert len(whole) == 50


def test_several_files_are_one_trace_in_order(tmp_path: Path) -> None:
    a = write(tmp_path / "a.log", "\n".join(CLF_LINES[:2]))
    b = write(tmp_path / "b.log", "\n".join(CLF_LINES[2:]))
    table, rep = read_log([a, b])
    assert rep.parsed == 5 and table["url"].iloc[2] == "/images/a.gif"
    with pytest.raises(FileNotFoundError, match="not found"):
        read_log([a, tmp_path / "nope.log"])


def test_bundled_traces_chunked_equal_whole() -> None:
    whole, rep = read_log(EPA, "epa")
    parts = list(iter_log(EPA, "epa", chunk_lines=10_000))
    assert len(parts) == 5
    pd.testing.assert_frame_equal(whole, pd.concat(parts, ignore_index=True), check_dtype=False)
    assert rep.lines == 47_748 and rep.malformed == 0


def test_bundled_formats_are_sniffed() -> None:
    for path, fmt in ((EPA, "epa"), (WC98, "wc98csv"), (SDSC, "sdsc")):
        with open_text(path) as fh:
            head = [next(fh) for _ in range(200)]
        assert sniff_format(head) == fmt
    _, rep = read_log(SDSC)
    assert rep.lines == 28_338 and rep.malformed == 0


# --- fuzzing -----------------------------------------------------------------------------
_token = st.text(alphabet=st.characters(blacklist_characters='\n\r"', min_codepoint=33,
                                        max_codepoint=126), min_size=1, max_size=12)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.text(max_size=80), max_size=20), st.sampled_from(FORMATS))
def test_fuzz_arbitrary_lines_never_crash(lines: list[str], fmt: str) -> None:
    lines = [ln.replace("\n", " ").replace("\r", " ") for ln in lines]
    table, rep = parse_lines(lines, fmt)
    assert rep.parsed + rep.malformed == rep.lines
    assert len(table) == rep.parsed
    assert tuple(table.columns) == COLUMNS


@settings(max_examples=150, deadline=None)
@given(host=_token, path=_token, status=st.integers(100, 599),
       size=st.one_of(st.none(), st.integers(0, 10**12)),
       when=st.datetimes(min_value=pd.Timestamp("1990-01-01").to_pydatetime(),
                         max_value=pd.Timestamp("2030-12-31").to_pydatetime()),
       method=st.sampled_from(["GET", "POST", "HEAD"]), junk=st.text(max_size=30))
def test_fuzz_valid_clf_lines_round_trip(host: str, path: str, status: int, size: int | None,
                                         when: object, method: str, junk: str) -> None:
    ts = pd.Timestamp(when).floor("s")
    stamp = ts.strftime("%d/%b/%Y:%H:%M:%S")
    size_s = "-" if size is None else str(size)
    good = f'{host} - - [{stamp} +0000] "{method} /{path} HTTP/1.0" {status} {size_s}'
    bad = junk.replace("\n", " ").replace("\r", " ")
    table, rep = parse_lines([good, "x" + bad], "clf")
    assert rep.parsed >= 1
    row = table.iloc[0]
    assert row["url"] == "/" + path and row["method"] == method and row["status"] == status
    assert row["size"] == (-1 if size is None else size)
    assert row["time"] == int(ts.timestamp())
    assert np.issubdtype(table["time"].dtype, np.integer)
