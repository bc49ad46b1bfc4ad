"""Signing a whole document root, with SINEX Forward Authenticators and minimal re-signing.

Layout on disk::

    DOCROOT/index.html, DOCROOT/a/b.html, ...      the documents (served as they are)
    DOCROOT/.sine/public.pem                        the origin's public key
    DOCROOT/.sine/tags/<relative path>.at           the separate tag of each document
    DOCROOT/.sine/trees/<tree id>/<path>.tt         tree mode: the signed TreeTag (TREE.md §3)
    DOCROOT/.sine/trees/<tree id>/<path>.ob         tree mode: the outboard (TREE.md §4)
    DOCROOT/.sine/mice/<path>.json                  MICE: record size and the RFC 9421 signed
                                                    head of the mi-sha256-03 variant

A path ending in ``/`` denotes its ``index.html``; tags always carry the canonical path
(``/dir/index.html``), and :func:`canonical_path` is what clients apply before verifying.

SINEX signing runs in two passes.  Pass one hashes every document and fixes its identity
(``h_1, n, T, E``) and hence its ``AT_sign``; pass two computes, for every HTML page,
``Expected_Set(P)`` (:mod:`sine.links`) and ``Forward_Authenticator(P)`` from the pass-one
digests, and signs.  Because ``AT_sign`` leaves the Forward Authenticator out, cyclic links are
fine, and :func:`sign_site` with an existing store re-signs only what changed: documents whose
bytes changed get a new identity (new ``T``); pages that *link* to them keep their identity and
get a new Forward Authenticator and signature; every other tag is left untouched.

Beside each chain tag, :func:`sign_site` writes one signed tree per configuration in ``trees``
(``sine.tree``: hash and chunk-group size; ids such as ``sha256-1024``, see
:func:`sine.tree_http.tree_id`) and, unless ``mice_record_size`` is ``None``, the signed head of
the document's ``mi-sha256-03`` encoding (:mod:`sine.mice`, :mod:`sine.httpsig`).  Both share the
chain tag's ``T`` and ``E`` and are rewritten exactly when the chain tag's identity is (content,
options or renewal), or when they are missing; the chain formats are unchanged.
"""

from __future__ import annotations

import json
import mimetypes
import os
from collections.abc import Sequence
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
from .httpsig import MICE_COVERED, key_id_for, sign_response
from .links import expected_set
from .mice import RECORD_SIZES, mice_encode, response_fields
from .tag import DEFAULT_BLOCK_SIZE, DEFAULT_LIFETIME, SignedDocument, hash_chain
from .tree import (
    TreeHash,
    TreeHead,
    TreeTag,
    build_outboard,
    pull_tree_tag,
    push_outboard,
    push_tree_tag,
)
from .tree_http import tree_id

__all__ = [
    "STORE_DIR",
    "SignReport",
    "canonical_path",
    "document_paths",
    "tag_file",
    "load_signed",
    "sign_site",
    "signed_from_separate",
    "DEFAULT_TREES",
    "DEFAULT_MICE_RECORD_SIZE",
    "MICE_PATH_COMPONENT",
    "MiceHead",
    "tree_files",
    "mice_file",
    "load_mice_head",
    "media_type",
]

STORE_DIR = ".sine"
#: the tree configurations signed by default: SHA-256 and BLAKE3 over 1 KiB groups
DEFAULT_TREES: tuple[tuple[TreeHash, int], ...] = ((TreeHash.SHA256, 1024),
                                                   (TreeHash.BLAKE3, 1024))
DEFAULT_MICE_RECORD_SIZE = 16384
#: the RFC 9421 component binding a MICE signature to the request path (RFC 9421 §2.4)
MICE_PATH_COMPONENT = '"@path";req'
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


def tree_files(docroot: Path, tree: str, path: str) -> tuple[Path, Path]:
    """``(tree tag file, outboard file)`` of ``path`` for tree id ``tree``."""
    base = Path(docroot, STORE_DIR, "trees", tree, path.lstrip("/"))
    return base.with_name(base.name + ".tt"), base.with_name(base.name + ".ob")


def mice_file(docroot: Path, path: str) -> Path:
    return Path(docroot, STORE_DIR, "mice", path.lstrip("/") + ".json")


def media_type(path: str) -> str:
    """The ``Content-Type`` the origin sends for ``path`` (and a MICE signature covers)."""
    return mimetypes.guess_type(path)[0] or "application/octet-stream"


@dataclass(frozen=True)
class MiceHead:
    """The stored signed head of a document's ``mi-sha256-03`` variant: its record size,
    ``created`` (= ``T``) and the field lines (``Content-Type``, ``Content-Encoding``,
    ``Digest``, ``Content-Digest``, ``Unencoded-Digest``, ``Signature-Input``, ``Signature``)."""

    record_size: int
    created: int
    fields: tuple[tuple[str, str], ...]


def load_mice_head(docroot: Path, path: str) -> MiceHead | None:
    """The stored MICE head of ``path``, or ``None`` (missing or unreadable)."""
    try:
        raw = json.loads(mice_file(docroot, path).read_text("utf-8"))
        return MiceHead(int(raw["record_size"]), int(raw["created"]),
                        tuple((str(n), str(v)) for n, v in raw["fields"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None


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
    _atomic_write(tag_file(root, path), push_separate_tag(at))


def _atomic_write(file: Path, data: bytes) -> None:
    file.parent.mkdir(parents=True, exist_ok=True)
    tmp = file.with_name(file.name + ".tmp")
    tmp.write_bytes(data)
    tmp.replace(file)


def _tree_current(tag_path: Path, ident: TagInfo) -> bool:
    """Whether the stored tree tag belongs to ``ident`` (same ``T``, ``E``, ``L``)."""
    try:
        head = pull_tree_tag(Buffer(tag_path.read_bytes())).head
    except Exception:  # missing, corrupt or foreign: sign again
        return False
    return (head.timestamp, head.expires, head.content_length) == (
        ident.timestamp, ident.expires, ident.content_length)


def _write_trees(root: Path, path: str, ident: TagInfo, trees: Sequence[tuple[TreeHash, int]],
                 key: SigningKey, force: bool) -> None:
    """Tree mode: an outboard and a signed :class:`~sine.tree.TreeTag` per configuration,
    with the chain tag's ``T`` and ``E`` (the outboard first, so a tag never names a tree
    that is not on disk)."""
    data: bytes | None = None
    for alg, group_size in trees:
        tag_path, ob_path = tree_files(root, tree_id(alg, group_size), path)
        if not force and ob_path.is_file() and _tree_current(tag_path, ident):
            continue
        if data is None:
            data = Path(root, path.lstrip("/")).read_bytes()
        outboard, tree_root = build_outboard(data, group_size, TreeHash(alg))
        head = TreeHead(TreeHash(alg), key.alg, group_size, ident.timestamp, ident.expires,
                        len(data), path, tree_root)
        _atomic_write(ob_path, push_outboard(outboard))
        _atomic_write(tag_path, push_tree_tag(TreeTag(head, key.sign(head.signed_message()))))


def _write_mice(root: Path, path: str, ident: TagInfo, record_size: int, key: SigningKey,
                force: bool) -> None:
    """MICE: encode the document with ``mi-sha256-03`` and sign the response head (RFC 9421,
    ``created = T``, ``expires = E``, bound to the path); store the field lines."""
    old = load_mice_head(root, path)
    if not force and old is not None and (old.record_size, old.created) == (
            record_size, ident.timestamp):
        return
    data = Path(root, path.lstrip("/")).read_bytes()
    encoding = mice_encode(data, record_size, record_sizes=RECORD_SIZES)
    fields = [("Content-Type", media_type(path)), *response_fields(encoding)]
    signed = sign_response(200, fields, encoding.body, key, key_id=key_id_for(key.verifying_key()),
                           now=ident.timestamp, expires=ident.expires, unencoded=data,
                           covered=(*MICE_COVERED, MICE_PATH_COMPONENT), request_path=path)
    raw = {"record_size": record_size, "created": ident.timestamp,
           "fields": [list(line) for line in signed]}
    _atomic_write(mice_file(root, path), json.dumps(raw, indent=1).encode())


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
    trees: Sequence[tuple[TreeHash, int]] = DEFAULT_TREES,
    mice_record_size: int | None = DEFAULT_MICE_RECORD_SIZE,
) -> SignReport:
    """(Re)sign every document under ``docroot``; write tags and the public key.

    Pass one fixes every document's identity and so its ``AT_sign`` digest; pass two builds
    each HTML page's Forward Authenticator from those digests (SINEX, so pages may link in
    cycles) and signs and writes every tag whose identity or Forward Authenticator changed.
    Then each document's trees (one per ``(hash, group size)`` in ``trees``) and its MICE head
    (record size ``mice_record_size``, 1024..16384; ``None`` for none) are written where the
    identity changed or they are missing.
    """
    if mice_record_size is not None and mice_record_size not in RECORD_SIZES:
        raise ValueError(f"mice_record_size must lie in {RECORD_SIZES.start}.."
                         f"{RECORD_SIZES.stop - 1}")
    for alg, group_size in trees:
        tree_id(alg, group_size)  # a ValueError now, not after half the site
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
    for path in paths:
        ident, _, _, _ = first[path]
        changed = actions[path] not in ("unchanged", "forward-authenticator")
        _write_trees(root, path, ident, trees, key, changed)
        if mice_record_size is not None:
            _write_mice(root, path, ident, mice_record_size, key, changed)
    pub = Path(root, STORE_DIR, "public.pem")
    pub.parent.mkdir(parents=True, exist_ok=True)
    pub.write_bytes(key.verifying_key().to_pem())
    return SignReport(actions)


def _load_quietly(root: Path, path: str) -> SeparateTag | None:
    try:
        return load_signed(root, path)
    except Exception:  # a corrupt or foreign store entry is simply re-signed
        return None
