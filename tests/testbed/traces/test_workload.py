"""Preprocessing as in the paper: GET/200 filter, canonical URLs, (URL, size) objects, chunks."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from testbed.traces.workload import (
    DAY,
    canonical_url,
    canonicalise,
    daytime_chunks,
    preprocess,
    select_chunk,
    window,
)


@pytest.mark.parametrize(("raw", "canon"), [
    ("/a/b.html", "/a/b.html"),
    ("http://www.lcs.mit.edu/a/b.html", "/a/b.html"),
    ("HTTP://Host:8080/x?y=1#frag", "/x?y=1"),
    ("//a///b//c", "/a/b/c"),
    ("/a/./b/../c", "/a/c"),
    ("/a/b/..", "/a/"),
    ("/../../x", "/x"),
    ("/%7euser/%41%2f%2a", "/~user/A%2F%2A"),
    ("/q?x=%7e%2f", "/q?x=~%2F"),
    ("relative.html", "/relative.html"),
    ("/a/b/.", "/a/b/"),
])
def test_canonical_url(raw: str, canon: str) -> None:
    assert canonical_url(raw) == canon


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet="ab/.%7e?#=", max_size=30))
def test_canonical_url_is_idempotent(url: str) -> None:
    once = canonical_url(url)
    assert canonical_url(once) == once
    assert once.startswith("/")
    path = once.split("?", 1)[0]
    assert "//" not in path and "#" not in once


def _table(rows: list[tuple[int, str, str, int, int]]) -> pd.DataFrame:
    t, m, u, s, z = zip(*rows, strict=True)
    return pd.DataFrame({"time": np.array(t, np.int64), "method": list(m), "url": list(u),
                         "status": np.array(s, np.int16), "size": np.array(z, np.int64)})


def test_preprocess_filters_and_assigns_objects() -> None:
    table = _table([
        (5, "GET", "/a", 200, 100),
        (1, "GET", "http://h/a", 200, 100),     # same object as /a, earlier in time
        (2, "POST", "/a", 200, 100),            # not GET
        (3, "GET", "/b", 304, 0),               # not 200
        (4, "GET", "/c", 200, -1),              # no size
        (6, "GET", "/a", 200, 120),             # same URL, new size: a new object
        (7, "GET", "/./b", 200, 50),
    ])
    work = preprocess(table)
    assert work["time"].tolist() == [1, 5, 6, 7]           # sorted by time
    assert work["url"].tolist() == ["/a", "/a", "/a", "/b"]
    assert work["obj"].tolist() == [0, 0, 1, 2]
    assert work["size"].sum() == 370


def test_canonicalise_keeps_index() -> None:
    s = pd.Series(["/x/../y", "/y"], index=[10, 20])
    out = canonicalise(s)
    assert out.index.tolist() == [10, 20] and out.tolist() == ["/y", "/y"]


def _work(times: list[int], sizes: list[int], objs: list[int]) -> pd.DataFrame:
    return pd.DataFrame({"time": np.array(times, np.int64), "url": objs,
                         "size": np.array(sizes, np.int64), "obj": np.array(objs, np.int64)})


def test_daytime_chunks_have_the_volume_and_start_in_daytime() -> None:
    base = 10 * DAY
    times = [base + 3600 * h + 60 * i for h in range(24) for i in range(10)]
    work = _work(times, [1000] * len(times), list(range(len(times))))
    chunks = list(daytime_chunks(work, volume=5000, first_hour=9, last_hour=12))
    assert len(chunks) == 6                    # 30 requests in 09:00-11:59 → 6 of 5 × 1000 B
    for c in chunks:
        assert c["size"].sum() == 5000
        hour = (c["time"].iloc[0] - base) // 3600
        assert 9 <= hour < 12
    with pytest.raises(ValueError):
        list(daytime_chunks(work, volume=0))


def test_select_chunk_median_first_closest() -> None:
    base = 3 * DAY + 9 * 3600
    # chunk k (5 requests of 1000 B) repeats one object k times → compressibility varies
    times, objs = [], []
    for k in range(1, 6):
        for i in range(5):
            times.append(base + 600 * (5 * (k - 1) + i))
            objs.append(100 * k if i < k else 100 * k + i)
    work = _work(times, [1000] * 25, objs)
    first = select_chunk(work, 5000, "first")
    assert first["time"].iloc[0] == base
    closest = select_chunk(work, 5000, "closest", target=5.0)
    assert closest["obj"].nunique() == 1
    med = select_chunk(work, 5000, "median")
    assert len(med) == 5
    with pytest.raises(ValueError):
        select_chunk(work, 5000, "best")


def test_window() -> None:
    work = _work([1, 2, 3, 10], [1, 1, 1, 1], [0, 1, 2, 3])
    assert window(work, 2, 10)["time"].tolist() == [2, 3]
