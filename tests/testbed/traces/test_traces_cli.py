"""Manifest, locating, fetching (local files and file:// only) and the CLI."""

from __future__ import annotations

import gzip
import hashlib
import json
from pathlib import Path

import pytest

from testbed.traces.catalogue import (
    TraceEntry,
    TraceError,
    TraceFile,
    fetch,
    load_manifest,
    locate,
    main,
    sha256_file,
)


def test_bundled_files_match_manifest() -> None:
    man = load_manifest()
    bundled = [e for e in man.entries.values() if e.bundled]
    assert {e.name for e in bundled} >= {"EPA-HTTP", "WorldCup98-day6-sample", "SDSC-HTTP"}
    total = 0
    for e in bundled:
        assert e.redistributable
        for tf, path in zip(e.files, locate(e), strict=True):
            assert sha256_file(path) == tf.sha256
            assert path.stat().st_size == tf.size
            total += tf.size
    assert total < 30e6
    for name in ("NASA-HTTP", "ClarkNet-HTTP", "Calgary-HTTP", "Saskatchewan-HTTP",
                 "WorldCup98-day6", "LPDAAC-OPeNDAP"):
        assert name in man and not man[name].bundled
    assert not man["LPDAAC-OPeNDAP"].redistributable
    with pytest.raises(TraceError, match="unknown trace"):
        man["no-such-trace"]


def _entry(tmp_path: Path, content: bytes, pinned: bool = True) -> tuple[TraceEntry, Path]:
    src = tmp_path / "src" / "log.gz"
    src.parent.mkdir()
    src.write_bytes(content)
    digest = hashlib.sha256(content).hexdigest() if pinned else None
    entry = TraceEntry(name="T", title="t", origin="test", licence="test", format="clf",
                       files=(TraceFile("T/log.gz", digest, len(content) if pinned else None),))
    return entry, src


def test_fetch_from_path_folder_and_file_url(tmp_path: Path) -> None:
    content = gzip.compress(b'h - - [01/Jul/1995:00:00:01 -0400] "GET / HTTP/1.0" 200 5\n')
    entry, src = _entry(tmp_path, content)
    for i, source in enumerate((str(src), str(src.parent), src.as_uri())):
        dest = tmp_path / f"dest{i}"
        (out,) = fetch(entry, source, dest)
        assert out == dest / "T" / "log.gz" and out.read_bytes() == content
        assert [p.name for p in out.parent.iterdir()] == ["log.gz"]   # no temp files left


def test_fetch_checksum_mismatch_leaves_nothing(tmp_path: Path) -> None:
    entry, src = _entry(tmp_path, b"right bytes")
    src.write_bytes(b"wrong bytes")
    dest = tmp_path / "dest"
    with pytest.raises(TraceError, match="size|sha256"):
        fetch(entry, str(src), dest)
    assert not any(p.is_file() for p in dest.rglob("*"))


def test_fetch_unreachable_url_is_a_clear_error(tmp_path: Path) -> None:
    entry, _ = _entry(tmp_path, b"x")
    dest = tmp_path / "dest"
    with pytest.raises(TraceError, match="cannot download .* --from PATH"):
        fetch(entry, "http://127.0.0.1:9/none.gz", dest, timeout=2)
    with pytest.raises(TraceError, match="not found"):
        fetch(entry, str(tmp_path / "missing.gz"), dest)
    with pytest.raises(TraceError, match="unsupported source"):
        fetch(entry, "gopher://example/x", dest)
    assert not any(p.is_file() for p in dest.rglob("*"))


def test_fetch_unpinned_records_digest(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    entry, src = _entry(tmp_path, b"some log", pinned=False)
    (out,) = fetch(entry, str(src), tmp_path / "d")
    recorded = out.with_name("log.gz.sha256").read_text().strip()
    assert recorded == hashlib.sha256(b"some log").hexdigest()
    assert "no checksum pinned" in capsys.readouterr().err


def test_traces_dir_is_searched(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    entry, src = _entry(tmp_path, b"abc")
    monkeypatch.setenv("TRACES_DIR", str(src.parent))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    assert locate(entry, bundled=tmp_path / "nothing") == [src]
    monkeypatch.setenv("TRACES_DIR", str(tmp_path / "empty"))
    with pytest.raises(TraceError, match="fetch T"):
        locate(entry, bundled=tmp_path / "nothing")


def test_cli_stats_on_name_and_files(capsys: pytest.CaptureFixture, tmp_path: Path) -> None:
    assert main(["stats", "EPA-HTTP"]) == 0
    out = capsys.readouterr().out
    assert "| GET/200 requests with size | 35,291 |" in out
    assert "126,851,539" in out and "2.293" in out
    log = tmp_path / "x.log"
    log.write_text('h - - [01/Jul/1995:00:00:01 -0400] "GET /a HTTP/1.0" 200 10\n'
                   'h - - [01/Jul/1995:00:00:02 -0400] "GET /a HTTP/1.0" 200 10\nbad\n')
    assert main(["stats", str(log), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["get200"] == 2 and data["malformed"] == 1 and data["redundancy"] == 2.0


def test_cli_errors_and_help(capsys: pytest.CaptureFixture, tmp_path: Path) -> None:
    assert main(["stats", str(tmp_path / "missing.log")]) == 2
    assert "not found" in capsys.readouterr().err
    assert main(["fetch", "no-such-trace"]) == 2
    with pytest.raises(SystemExit) as exc:
        main(["--help"])
    assert exc.value.code == 0
    assert "fetch" in capsys.readouterr().out
    assert main(["verify"]) == 0
