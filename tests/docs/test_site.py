"""The documentation site builds with warnings as errors and renders in a real browser.

The site (``make docs``: Sphinx with ``docs/conf.py``, sources staged in ``build/docs/src``) is
built once per test session when ``build/docs/html/index.html`` is missing or older than any of
its sources (the pages of ``docs/``, the configuration, the notebooks, the library's modules
whose docstrings are the API reference, ``pyproject.toml`` whose scripts are the command-line
reference); a file lock keeps two xdist workers from building at once.

Headless Chromium then opens the index and one notebook page. Chromium writes every console
message of a page to stderr as a ``CONSOLE`` line, all at level ``INFO`` whatever the message's
level, so any console message counts as an error: the site logs nothing when it works.
:func:`test_console_errors_are_detected` proves the detector on a page with a deliberate
JavaScript error. The screenshots go to ``results/docs/``.
"""

from __future__ import annotations

import fcntl
import re
import shutil
import struct
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from matplotlib import image

REPO = Path(__file__).resolve().parents[2]
HTML = REPO / "build" / "docs" / "html"
SCREENSHOTS = REPO / "results" / "docs"
PACKAGES = ("tls12", "netsim", "testbed", "sslsplit", "sine", "reverse_ssl", "sslacc_sim",
            "webalps_sim")
# -E: read every source again (an incremental build would not repeat the warnings of pages
# that did not change, and a build that failed would pass the second time)
BUILD = [sys.executable, "-m", "sphinx", "-q", "-E", "-W", "--keep-going", "-b", "html", "-c", "docs",
         "-d", "build/docs/doctrees", "build/docs/src", "build/docs/html"]
CONSOLE = re.compile(r":CONSOLE[:(]\d+\)?\] (.*)")
WIDTH, HEIGHT = 1280, 900

sys.path.insert(0, str(REPO / "docs" / "_ext"))
import sitegen  # noqa: E402


def _sources() -> Iterator[Path]:
    yield REPO / "pyproject.toml"
    yield from (REPO / "docs").glob("*.py")
    yield from (REPO / "docs" / "_ext").glob("*.py")
    yield from (p for p in (REPO / "docs").rglob("*.md") if "results" not in p.parts)
    yield from (REPO / "notebooks").glob("*.ipynb")
    yield from (REPO / "results" / "notebooks").glob("*.ipynb")
    for package in PACKAGES:
        yield from (REPO / package).rglob("*.py")


@pytest.fixture(scope="session")
def site() -> Path:
    """The built site, rebuilt first when any source is newer than its index."""
    lock_path = REPO / "build" / "docs.lock"
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with lock_path.open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        index = HTML / "index.html"
        newest = max(p.stat().st_mtime for p in _sources())
        if not index.is_file() or index.stat().st_mtime < newest:
            (REPO / "build" / "docs" / "src").mkdir(parents=True, exist_ok=True)
            done = subprocess.run(BUILD, cwd=REPO, capture_output=True, text=True, timeout=600)
            if done.returncode != 0:
                index.unlink(missing_ok=True)  # the next run builds again, never trusts this one
            assert done.returncode == 0, f"make docs failed:\n{done.stdout}\n{done.stderr}"
            index.touch()  # Sphinx leaves unchanged pages alone; the index marks the build
    return HTML


def _chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    assert found, "Chromium is needed (Debian package chromium, installed by .ci/run)"
    return found


def open_page(url: str, screenshot: Path, profile: Path) -> list[str]:
    """Load ``url`` in headless Chromium, save a screenshot, return its console messages."""
    screenshot.parent.mkdir(parents=True, exist_ok=True)
    screenshot.unlink(missing_ok=True)
    done = subprocess.run(
        [_chromium(), "--headless=new", "--no-sandbox", "--disable-gpu", "--enable-logging=stderr",
         "--v=0", f"--user-data-dir={profile}", f"--screenshot={screenshot}",
         f"--window-size={WIDTH},{HEIGHT}", url],
        capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return [m.group(1) for line in done.stderr.splitlines() if (m := CONSOLE.search(line))]


def assert_rendered_png(path: Path) -> None:
    """A PNG of the window's size that is not one flat colour."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    assert struct.unpack(">II", data[16:24]) == (WIDTH, HEIGHT)
    pixels = image.imread(path)
    assert len(data) > 20_000 and float(np.std(pixels)) > 0.05, f"{path} looks blank"


def test_console_errors_are_detected(tmp_path: Path) -> None:
    page = tmp_path / "broken.html"
    page.write_text('<!doctype html><html><body><p>broken</p>'
                    '<script>console.error("by hand"); notDefined();</script></body></html>')
    shot = tmp_path / "broken.png"
    messages = open_page(page.as_uri(), shot, tmp_path / "profile")
    assert any("Uncaught ReferenceError: notDefined is not defined" in m for m in messages)
    assert any('"by hand"' in m for m in messages)
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("page", ["index.html", "notebooks/sslsplit.html"])
def test_page_renders_without_console_errors(site: Path, page: str, tmp_path: Path) -> None:
    path = site / page
    assert path.is_file(), f"{page} was not built"
    shot = SCREENSHOTS / f"{page.replace('/', '-').removesuffix('.html')}.png"
    messages = open_page(path.as_uri(), shot, tmp_path / "profile")
    assert messages == [], f"console messages on {page}: {messages}"
    assert_rendered_png(shot)
    html = path.read_text(encoding="utf-8")
    for ref in re.findall(r'(?:src|href)="(?![a-z]+:)([^"#?]+)', html):  # local files only
        assert (path.parent / ref).exists(), f"{page} refers to a missing {ref}"


def test_site_has_every_page(site: Path) -> None:
    """A page per tutorial, public module, program and notebook; the index links them."""
    for tutorial in ("ssl-splitting", "sine", "reverse-ssl", "sslacc", "webalps"):
        assert (site / "tutorials" / f"{tutorial}.html").is_file()
    modules = sitegen.public_modules(REPO)
    assert "tls12.record" in modules and not any("._" in m for m in modules)
    missing = [m for m in modules if not (site / "api" / f"{m}.html").is_file()]
    assert not missing, f"no API page for {missing}"
    programs = sitegen.programs(REPO)
    assert len(programs) >= 20
    for name, (_module, runner) in programs.items():
        cli_page = (site / "cli" / f"{name}.html").read_text(encoding="utf-8")
        assert "usage" in cli_page and runner in cli_page, name
    for notebook, _executed in sitegen.notebook_sources(REPO):
        assert (site / "notebooks" / f"{notebook.stem}.html").is_file()
    index = (site / "index.html").read_text(encoding="utf-8")
    for target in ("tutorials/index.html", "api/index.html", "cli/index.html",
                   "notebooks/index.html", "architecture.html"):
        assert f'href="{target}' in index, target
