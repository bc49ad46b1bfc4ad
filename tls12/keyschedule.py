"""The key schedule of a connection (RFC 5246 §6.3, §7.4.9, §8.1; RFC 7627): a mixin.

:class:`tls12.connection.Connection` inherits these steps: the master secret from the
premaster (extended when negotiated), the key block cut into the two directions' pending
keys (plus the explicit-IV keys k' of :mod:`tls12.record`) with the connection's key-log
line when the config asks for it (:mod:`tls12.keylog`), the pending keys of a
delegated connection (:mod:`tls12.delegate`: handles, never secrets), and the Finished
values it sends and checks.  The handshake handlers of both roles and of the protocol
variants (Reverse SSL's key transport) call them; none of them touches records or state.
"""

from __future__ import annotations

import hmac
from typing import TYPE_CHECKING, Any

from . import prf
from .context import HandshakeContext
from .errors import DecryptError
from .keylog import keylog_line
from .messages import Finished
from .record import IV_KEY_LABEL, DirectionKeys
from .suites import SuiteParams

if TYPE_CHECKING:
    from .delegate import EventDelegate, KeyHandle, SessionDelegate


__all__ = ["KeySchedule"]


class KeySchedule:
    """Key derivation and Finished values; the attributes come from the connection."""

    is_client: bool = False
    config: Any
    context: HandshakeContext
    master_secret: Any
    client_random: Any
    server_random: Any
    extended_master_secret: Any
    _delegate: SessionDelegate | EventDelegate | None
    _key_handle: KeyHandle | None
    _pending_read: DirectionKeys | None
    _pending_write: DirectionKeys | None

    if TYPE_CHECKING:  # provided by tls12.connection.Connection, which inherits this mixin
        @property
        def suite_params(self) -> SuiteParams | None: ...

        def _transcript_before_message(self) -> bytes: ...

    def _derive_keys(self) -> None:
        params = self.suite_params
        assert params is not None
        block = prf.key_block(
            self.master_secret,
            self.client_random,
            self.server_random,
            params.mac_length,
            params.key_length,
            params.fixed_iv_length,
        )
        # k' of each direction (tls12.record: explicit CBC IVs), from the master secret under
        # a label of our own, so nothing in the key block -- exposed in part by sslsplit -- gives it
        client_iv_key = server_iv_key = b""
        if params.block_size:
            seed = self.server_random + self.client_random
            iv_keys = prf.prf(self.master_secret, IV_KEY_LABEL, seed, 32)
            client_iv_key, server_iv_key = iv_keys[:16], iv_keys[16:]
        client = DirectionKeys(
            params, block.client_key, block.client_mac_key, block.client_iv, client_iv_key
        )
        server = DirectionKeys(
            params, block.server_key, block.server_mac_key, block.server_iv, server_iv_key
        )
        self._pending_write, self._pending_read = (client, server) if self.is_client else (server, client)
        self._log_master_secret()

    def _log_master_secret(self) -> None:
        """The debugging switch (:mod:`tls12.keylog`): the NSS key-log line, once per
        connection -- here, where a full handshake and a resumption both make their keys."""
        sink = self.config.keylog
        if sink is not None:
            sink(keylog_line(self.client_random, self.master_secret))

    def _set_premaster(self, premaster: bytes) -> None:
        """Master secret from the premaster (RFC 7627 when negotiated), then the pending keys.

        Call it once the ClientKeyExchange (or a variant's key-transport message)
        is in the transcript: the extended master secret hashes the transcript up
        to and including that message.
        """
        if self.extended_master_secret:
            self.master_secret = prf.extended_master_secret(premaster, prf.transcript_hash(bytes(self.context.transcript)))
        else:
            self.master_secret = prf.master_secret(premaster, self.client_random, self.server_random)
        self._derive_keys()

    def _set_delegated_keys(self, handle: KeyHandle) -> None:
        """Pending keys of a delegated connection: the delegate's handle, one view per direction."""
        from .delegate import DelegatedDirection

        assert self._delegate is not None
        self._key_handle = handle
        client = DelegatedDirection(self._delegate, handle, True)
        server = DelegatedDirection(self._delegate, handle, False)
        pending = (client, server) if self.is_client else (server, client)
        self._pending_write, self._pending_read = pending  # type: ignore[assignment]  # delegated mode keeps DelegatedDirection in the key slots

    def _finished_body(self, from_client: bool) -> bytes:
        """Our verify_data (a delegated server asks its delegate instead: ``tls12.delegation``)."""
        return prf.verify_data(self.master_secret, from_client, prf.transcript_hash(bytes(self.context.transcript)))

    def _check_finished(self, finished: Finished) -> None:
        """Verify the peer's Finished against the transcript before it (the base hashed it
        already); a delegated server asks its delegate instead (``tls12.delegation``)."""
        expected = prf.verify_data(
            self.master_secret, not self.is_client, prf.transcript_hash(self._transcript_before_message())
        )
        if not hmac.compare_digest(finished.verify_data, expected):
            raise DecryptError("Finished verify_data mismatch")
