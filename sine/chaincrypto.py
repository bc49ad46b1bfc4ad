"""Verification of a run of SINE hash-chain records in one call: the public loader.

What a run is (``FORMAT.md`` sections 3, 5 and 7)
--------------------------------------------------
Between the tag and the last record of a chain, every record of a ``Content-Encoding: sine``
body is ``Y_i = B_i || h_{i+1}`` (``block_size + hlen`` bytes), and it verifies when
``H(Y_i) == h_i``, the value trusted so far; it then hands over the next trusted value
``h_{i+1}``.  :func:`verify_run` checks consecutive records of that shape in one call::

    blocks, trusted, mismatch = verify_run(hash_name, block_size, trusted, data, max_records)

* ``hash_name`` is ``"sha256"``, ``"sha384"`` or ``"sha512"``; ``block_size`` is in
  ``16..2^20``; ``trusted`` is ``h_i`` (bytes of the hash's length); ``data`` is any
  C-contiguous buffer starting at the record ``Y_i``; at most ``max_records`` (an int >= 0)
  records are checked.
* ``blocks`` are the verified blocks ``B_i, B_{i+1}, ...`` (``block_size`` bytes each, in
  order): ``len(blocks)`` records verified, and ``data[len(blocks) * (block_size + hlen):]``
  is left for the caller.  ``trusted`` is the value trusted after them (the link of the
  last verified record; the argument itself when none verified).
* ``mismatch`` is ``True`` when the record after the verified ones is whole (and within
  ``max_records``) and does *not* verify: its index in the run is ``len(blocks)``.  It is
  ``False`` when the run stopped because ``data`` holds no further whole record or
  ``max_records`` were verified.

With ``links`` (the separate-tag form, a buffer of concatenated ``hlen``-byte links), the
records in ``data`` are bare blocks of ``block_size`` bytes, record ``k`` of the run verifies
when ``H(B || links[k]) == trusted``, and ``links[k]`` becomes the trusted value; the run is
also bounded by the number of whole links.

:func:`verify_run_joined` takes the same arguments and makes the same checks; it returns
the verified blocks joined into one bytes object (``len(joined) // block_size`` records
verified) instead of a list, one allocation per run instead of one per block
(``StreamVerifier(coalesce=True)`` uses it).

The last record of a chain (zero padding, the implicit terminator) is not a run record: the
caller stops the run before it (``max_records``).  :class:`sine.verifier.StreamVerifier`
feeds every run of whole records it holds to one call.

Errors: argument misuse raises ``TypeError`` / ``ValueError`` (``BufferError`` for a
non-contiguous buffer), identically in both backends; a record that does not verify is not
an error here (``mismatch``): the verifier turns it into its typed
:class:`~sine.errors.BlockMismatch`.

Backends: the C extension ``sine._chaincrypto`` (OpenSSL EVP, one call per run, the GIL
released while a run of at least :data:`GIL_RELEASE_BYTES` bytes is hashed) and its
pure-Python twin ``sine._chaincrypto_py`` (hashlib), which give identical results for every
input.  Both copy each block before hashing it and return that copy, so the released bytes
are the checked bytes even if ``data`` is a buffer someone else may write to; a call keeps no
state, so threads may call it at once.  :data:`verify_run` (and :data:`verify_run_joined`)
is the C function when the extension is importable, unless ``SINE_PURE_PYTHON=1``;
:data:`BACKEND` says which.  :data:`py_verify_run` is always the twin and :data:`c_verify_run`
the C function or ``None`` (likewise ``py_verify_run_joined``, ``c_verify_run_joined``).
"""

from __future__ import annotations

import os

from . import _chaincrypto_py

__all__ = [
    "BACKEND",
    "GIL_RELEASE_BYTES",
    "c_verify_run",
    "c_verify_run_joined",
    "py_verify_run",
    "py_verify_run_joined",
    "verify_run",
    "verify_run_joined",
]

GIL_RELEASE_BYTES = _chaincrypto_py.GIL_RELEASE_BYTES

py_verify_run = _chaincrypto_py.verify_run
py_verify_run_joined = _chaincrypto_py.verify_run_joined

try:
    from . import _chaincrypto as _c
except ImportError:  # extension not built
    _c = None  # type: ignore[assignment]  # optional extension: every use checks for None

c_verify_run = None if _c is None else _c.verify_run
c_verify_run_joined = None if _c is None else _c.verify_run_joined

if _c is not None and os.environ.get("SINE_PURE_PYTHON", "") not in ("1", "true", "yes"):
    BACKEND = "c"
    verify_run = _c.verify_run
    verify_run_joined = _c.verify_run_joined
else:
    BACKEND = "python"
    verify_run = _chaincrypto_py.verify_run
    verify_run_joined = _chaincrypto_py.verify_run_joined
