"""Signing a whole document root, with SINEX Forward Authenticators and minimal re-signing.

Layout on disk::

    DOCROOT/index.html, DOCROOT/a/b.html, ...      the documents (served as they are)
    DOCROOT/.sine/public.pem                        the origin's public key
    DOCROOT/.sine/tags/<relative path>.at           the separate tag of each document

A path ending in ``/`` denotes its ``index.html``; tags always carry the canonical path
(``/dir/index.html``), and :func:`canonical_path` is what clients apply before verifying.

SINEX signing runs in two passes.  Pass one hashes every document and fixes its identity
(``h_1, n, T, E``) and hence its ``AT_sign``; pass two computes, for every HTML page,
``Expected_Set(P)`` (:mod:`sine.links`) and ``Forward_Authenticator(P)`` from the pass-one
digests, and signs.  Because ``AT_sign`` leaves the Forward Authenticator out, cyclic links are
fine, and :func:`sign_site` with an existing store re-signs only what changed: documents whose
bytes changed get a new identity (new ``T``); pages that *link* to them keep their identity and
get a new Forward Authenticator and signature; every other tag is left untouched.
"""

from __future__ import annotations

import mimetypes
import os
from dataclasses import dataclass
from pathlib import Path

from tls12.buffer import Buffer

from .algorithms import HashAlg, SigningKey
from .format import (
    ForwardAuthenticator,
    SeparateTag,
    Tag,
    TagInfo,
    pull_separate_tag,
    push_forward_authenticator,
    push_separate_tag,
)
from .links import expected_set
from .tag import DEFAULT_BLOCK_SIZE, DEFAULT_LIFETIME, SignedDocument, hash_chain

__all__ = [
    "STORE_DIR",
    "SignReport",
    "canonical_path",
    "document_paths",
    "tag_file",
    "load_signed",
    "sign_site",
    "signed_from_separate",
]

STORE_DIR = ".sine"
_HTML_TYPES = {"text/html", "application/xhtml+xml"}


def canonical_path(path: str) -> str:
    """``/dir/`` -> ``/dir/index.html``; other paths unchanged."""
    return path + "index.html" if path.endswith("/") else path


def document_paths(docroot: Path) -> list[str]:
    """Every regular file under ``docroot`` (not under ``.sine``), as ``/relative/path``."""
    out = []
    for dirpath, dirnames, filenames in os.walk(docroot):
        dirnames[:] = sorted(d for d in dirnames if d != STORE_DIR)
        for name in sorted(filenames):
            rel = Path(dirpath, name).relative_to(docroot).as_posix()
            out.append("/" + rel)
    return sorted(out)


def tag_file(docroot: Path, path: str) -> Path:
    return Path(docroot, STORE_DIR, "tags", path.lstrip("/") + ".at")


def signed_from_separate(at: SeparateTag) -> SignedDocument:
    """Rebuild the stream encoder's input (recomputes the FA chain links)."""
    fa_links: tuple[bytes, ...] = ()
    if at.forward_authenticator:
        chain = hash_chain(at.forward_authenticator, at.tag.info.block_size, at.tag.info.hash_alg)
        fa_links = tuple(chain[1:-1])
    return SignedDocument(at.tag, at.links, at.forward_authenticator, fa_links)


def load_signed(docroot: Path, path: str) -> SeparateTag | None:
    """The stored separate tag of ``path``, or ``None``."""
    file = tag_file(docroot, path)
    if not file.is_file():
        return None
    return pull_separate_tag(Buffer(file.read_bytes()))


@dataclass(frozen=True)
class SignReport:
    """What :func:`sign_site` did to each path: ``new``, ``content`` (bytes changed),
    ``renewed`` (near expiry), ``forward-authenticator`` (only the FA changed) or
    ``unchanged``."""

    actions: dict[str, str]

    def signed(self) -> list[str]:
        return sorted(p for p, a in self.actions.items() if a != "unchanged")


def _is_html(path: str) -> bool:
    return (mimetypes.guess_type(path)[0] or "") in _HTML_TYPES


@dataclass(frozen=True)
class _Signing:
    """The options of one :func:`sign_site` run that decide whether an old tag still fits."""

    key: SigningKey
    now: float
    lifetime: int
    block_size: int
    hash_alg: HashAlg
    renew_before: int


def _identity(root: Path, path: str, how: _Signing
              ) -> tuple[TagInfo, list[bytes], SeparateTag | None, str]:
    """Pass one for ``path``: its identity (``h_1, n, T, E``) -- the old one if the document,
    the options and the expiry still fit --, its hash chain, the old tag and the action."""
    data = Path(root, path.lstrip("/")).read_bytes()
    chain = hash_chain(data, how.block_size, how.hash_alg)
    old = _load_quietly(root, path)
    o = old.tag.info if old else None
    if (
        o is not None
        and o.content_root == chain[0]
        and o.content_length == len(data)
        and o.block_size == how.block_size
        and o.hash_alg == how.hash_alg
        and o.sig_alg == how.key.alg
        and o.expires - how.renew_before > how.now
    ):
        return o, chain, old, "unchanged"
    timestamp = int(how.now)
    info = TagInfo(how.hash_alg, how.key.alg, how.block_size, timestamp,
                   timestamp + how.lifetime, len(data), path, chain[0])
    if o is None:
        action = "new"
    elif o.content_root != chain[0] or o.content_length != len(data):
        action = "content"
    else:
        action = "renewed"
    return info, chain, old, action


def _forward_authenticator(root: Path, path: str, digests: dict[str, bytes],
                           site_origins: tuple[str, ...]) -> bytes:
    """SINEX: the encoded Forward Authenticator of an HTML page (``b""`` if it links to no
    signed document of the site)."""
    html = Path(root, path.lstrip("/")).read_bytes()
    linked = [canonical_path(p) for p in expected_set(html, path, site_origins)]
    entries = tuple(sorted({(p, digests[p]) for p in linked if p in digests}))
    return push_forward_authenticator(ForwardAuthenticator(entries)) if entries else b""


def _write_tag(root: Path, path: str, ident: TagInfo, chain: list[bytes], fa_bytes: bytes,
               key: SigningKey) -> None:
    """Sign ``ident`` with the Forward Authenticator's length and root; write the separate tag
    atomically (a temporary file renamed over the old one)."""
    fa_root = hash_chain(fa_bytes, ident.block_size, ident.hash_alg)[0]
    info = TagInfo(
        ident.hash_alg, ident.sig_alg, ident.block_size, ident.timestamp, ident.expires,
        ident.content_length, ident.path, ident.content_root, len(fa_bytes), fa_root,
    )
    tag = Tag(info, key.sign(info.signed_message()))
    at = SeparateTag(tag, tuple(chain[1:-1]), fa_bytes)
    file = tag_file(root, path)
    file.parent.mkdir(parents=True, exist_ok=True)
    tmp = file.with_suffix(".tmp")
    tmp.write_bytes(push_separate_tag(at))
    tmp.replace(file)


def sign_site(
    docroot: Path | str,
    key: SigningKey,
    now: float,
    *,
    lifetime: int = DEFAULT_LIFETIME,
    block_size: int = DEFAULT_BLOCK_SIZE,
    hash_alg: HashAlg = HashAlg.SHA256,
    sinex: bool = True,
    renew_before: int = 3600,
    site_origins: tuple[str, ...] = (),
) -> SignReport:
    """(Re)sign every document under ``docroot``; write tags and the public key.

    Pass one fixes every document's identity and so its ``AT_sign`` digest; pass two builds
    each HTML page's Forward Authenticator from those digests (SINEX, so pages may link in
    cycles) and signs and writes every tag whose identity or Forward Authenticator changed.
    """
    root = Path(docroot)
    how = _Signing(key, now, lifetime, block_size, hash_alg, renew_before)
    paths = document_paths(root)
    first = {path: _identity(root, path, how) for path in paths}
    actions = {path: action for path, (_, _, _, action) in first.items()}
    digests = {path: info.at_sign() for path, (info, _, _, _) in first.items()}
    for path in paths:
        ident, chain, old, _ = first[path]
        fa_bytes = (_forward_authenticator(root, path, digests, site_origins)
                    if sinex and _is_html(path) else b"")
        if actions[path] == "unchanged":
            assert old is not None
            if old.forward_authenticator == fa_bytes:
                continue
            actions[path] = "forward-authenticator"
        _write_tag(root, path, ident, chain, fa_bytes, key)
    pub = Path(root, STORE_DIR, "public.pem")
    pub.parent.mkdir(parents=True, exist_ok=True)
    pub.write_bytes(key.verifying_key().to_pem())
    return SignReport(actions)


def _load_quietly(root: Path, path: str) -> SeparateTag | None:
    try:
        return load_signed(root, path)
    except Exception:  # a corrupt or foreign store entry is simply re-signed
        return None
