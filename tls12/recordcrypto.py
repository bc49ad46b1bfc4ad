"""TLS 1.2 record protection for MAC-then-encrypt suites: the public loader.

What a record looks like (RFC 5246 §6.2.3)
------------------------------------------
TLS 1.2's CBC suites *MAC, then encrypt*.  For a record with sequence number
``seq`` (implicit, 64 bits, never on the wire), content type, version and
plaintext ``P``::

    MAC      = HMAC(mac_key, seq(8) || type(1) || version(2) || len(P)(2) || P)
    fragment = IV || AES-CBC(enc_key, IV, P || MAC || padding)

where ``padding`` is ``p+1`` bytes of value ``p`` making the encrypted part a
multiple of 16 bytes.  Senders here always use the *minimal* padding, so the
C extension and the Python twin produce identical bytes; receivers accept any
valid padding up to 255 bytes, as the RFC requires.  NULL suites send
``P || MAC`` in the clear.  The 5-byte record header is the caller's job.

Why the MAC can travel apart from the payload (SSL splitting)
-------------------------------------------------------------
The MAC covers the *plaintext*, not the ciphertext.  So whoever knows the MAC
key can compute the MAC of a payload without encrypting it, and whoever knows
only the encryption key can build a valid record from a payload and a MAC it
was handed.  SSL splitting uses exactly this: the server sends the proxy the
MACs (and, in key-expose mode, the server-write encryption key) while the
proxy serves the payload bytes from its cache; :meth:`RecordCipher.seal_with_mac`
is the proxy's half, and a cipher built with ``mac_key=b""`` can do only that.
Encrypt-then-MAC (RFC 7366) and AEAD suites bind the MAC to the ciphertext and
make this impossible, which is why :mod:`tls12.suites` offers neither.

Why there must be no padding oracle
-----------------------------------
MAC-then-encrypt means the receiver must decrypt and strip the padding
*before* it can check the MAC.  If it reports (or takes visibly longer on) a
bad padding than on a bad MAC, an attacker who can replay modified
ciphertexts learns one plaintext byte per ~128 tries (Vaudenay 2002,
POODLE, Lucky 13).  :meth:`RecordCipher.open` therefore checks padding and
MAC in one pass, always computes the MAC, compares with a constant-time
comparison, and raises one error type with one message, ``bad record MAC``,
whatever went wrong.  The C stitched path runs OpenSSL's Lucky-13-hardened
code.  The C generic path checks the padding and extracts the MAC in
constant time (as OpenSSL's ``ssl3_cbc_copy_mac``) and hashes the padding as
dummy work so the number of hashed bytes is fixed, but HMAC finalisation can
still differ by a compression block: close to, not exactly, Lucky-13-proof.
Python makes no timing promises at all.

The API
-------
``RecordCipher(cipher, mac, enc_key, mac_key, *, stitched=True, multiblock=True)`` with
``cipher`` in ``{"null", "aes-128-cbc", "aes-256-cbc"}`` and ``mac`` in
``{"sha1", "sha256"}``; ``mac_length`` (20/32), ``block_size`` (0/16),
``stitched`` (whether OpenSSL's one-pass AES-CBC-HMAC cipher is in use) and
``multiblock`` (below) are read-only attributes.  Methods: ``compute_mac``, ``seal``, ``seal_with_mac``,
``open``, ``seal_many``, ``open_many`` (record *i* uses ``seq + i``).

``seal_stream(seq, type, version, data)`` is the exception to "no randomness
here": it cuts ``data`` into 2^14-byte records (the last shorter) and returns
them as whole wire records, 5-byte headers included, each with a *random*
explicit IV.  The C class seals runs of 8 or 4 full records in one interleaved
pass of OpenSSL's stitched cipher (``EVP_CTRL_TLS1_1_MULTIBLOCK_AAD`` /
``_ENCRYPT``, as libssl's ``ssl3_write_bytes`` does on large writes), which
draws the IVs from OpenSSL's RNG; ``multiblock`` says whether it does
(AES-NI machines; ``multiblock=False`` at construction turns it off).  The
rest, and the Python twin, seal one record at a time with a fresh random IV.
Only :class:`tls12.record.WriteProtection` with ``random_ivs=True`` calls it.

* ``explicit_iv`` is the record's IV field **verbatim** (16 bytes for AES,
  ``b""`` for NULL).  No randomness is drawn here: the connection draws IVs
  from its injected RNG, so outputs are deterministic and comparable.
* Limits: ``seq`` in 0..2^64-1, ``content_type`` 0..255, ``version``
  0..65535, plaintext ≤ 2^14 bytes on seal, fragment ≤ 2^14+2048 on open.
* Errors: argument misuse raises ``ValueError``/``TypeError``; a record that
  fails to open raises ``RecordCryptoError`` (a ``ValueError`` subclass).  The
  C and Python backends each define their own ``RecordCryptoError`` class:
  catch ``ValueError``, or the tuple :data:`RECORD_CRYPTO_ERRORS`.
* ``open_many`` is all-or-nothing: one bad record fails the whole call.
* Threads: the C class lets go of the GIL while ``seal_many``, ``open_many``
  or ``seal_stream`` works on 64 KiB or more (a 1 MiB seal no longer stops a
  server's other threads for a millisecond), and each object holds a lock of
  its own while it works, so one object may be shared by threads. The Python
  twin holds the GIL throughout.

Backend selection: :data:`RecordCipher` is the C class when the extension is
importable, unless ``TLS12_PURE_PYTHON=1``; :data:`BACKEND` says which.
:data:`PyRecordCipher` is always the Python twin and :data:`CRecordCipher` the
C class or ``None``.
"""

from __future__ import annotations

import os

from . import _recordcrypto_py

__all__ = [
    "BACKEND",
    "CRecordCipher",
    "FRAGMENT_MAX",
    "PLAINTEXT_MAX",
    "PyRecordCipher",
    "RECORD_CRYPTO_ERRORS",
    "RecordCipher",
    "RecordCryptoError",
]

PLAINTEXT_MAX = _recordcrypto_py.PLAINTEXT_MAX
FRAGMENT_MAX = _recordcrypto_py.FRAGMENT_MAX

PyRecordCipher = _recordcrypto_py.RecordCipher

try:
    from . import _recordcrypto as _c
except ImportError:  # extension not built
    _c = None  # type: ignore[assignment]  # optional extension: every use checks for None

CRecordCipher = None if _c is None else _c.RecordCipher

RECORD_CRYPTO_ERRORS: tuple[type[ValueError], ...] = (_recordcrypto_py.RecordCryptoError,) + (
    () if _c is None else (_c.RecordCryptoError,)
)

if _c is not None and os.environ.get("TLS12_PURE_PYTHON", "") not in ("1", "true", "yes"):
    BACKEND = "c"
    RecordCipher = _c.RecordCipher
    RecordCryptoError = _c.RecordCryptoError
else:
    BACKEND = "python"
    RecordCipher = _recordcrypto_py.RecordCipher  # type: ignore[assignment,misc]  # the Python twin has the C class's interface
    RecordCryptoError = _recordcrypto_py.RecordCryptoError  # type: ignore[assignment,misc]  # both subclass ValueError, same role

