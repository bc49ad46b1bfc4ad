"""Wire format of the Reverse SSL handshake: one hello extension and three handshake messages.

Reverse SSL is negotiated in the hellos (§4: "If any party does not support
reverse SSL, one of earlier versions will be used instead"): the client lists
the flavours it supports in a ``reverse_ssl`` extension, the server echoes the
one it picked.  A peer that does not know the extension ignores it (RFC 5246
§7.4.1.4) and the standard handshake runs -- the backward compatibility the
paper promises, tested against the plain :mod:`tls12` client and server.

Full flows (``[]`` = only in that flavour)::

    ClientHello{reverse_ssl: modes}    -->
                                       <--  ServerHello{reverse_ssl: mode},
                                            [PuzzleRequest], ServerHelloDone
    [Certificate]   (client auth)
    [PuzzleReply]   (puzzle)           -->
                                       <--  Certificate, KeyTransport
    ChangeCipherSpec, Finished         -->
                                       <--  ChangeCipherSpec, Finished

KeyTransport carries the premaster secret encrypted under the *client's* RSA
key (the server's only online public-key operation) and the server's
online/offline signature over the transcript hash (see :func:`signed_message`)::

    struct {
        opaque encrypted_premaster<1..2^16-1>;
        OnlineOfflineSignature signature;      /* reverse_ssl.onoff */
    } KeyTransport;

The private-use code points below are this testbed's choice (no IANA
assignment exists).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from enum import IntEnum

from tls12.buffer import Buffer, Writer
from tls12.errors import DecodeError

from .onoff import (
    OnlineOfflineSignature,
    pull_online_offline_signature,
    push_online_offline_signature,
)

__all__ = [
    "REVERSE_SSL_EXTENSION",
    "ReverseHandshakeType",
    "Mode",
    "KeyTransport",
    "encode_offered_modes",
    "decode_offered_modes",
    "encode_chosen_mode",
    "decode_chosen_mode",
    "pull_key_transport",
    "push_key_transport",
    "signed_message",
]

REVERSE_SSL_EXTENSION = 0xFFA5
"""Extension type (private-use range 0xFF00-0xFFFF)."""


class ReverseHandshakeType(IntEnum):
    PUZZLE_REQUEST = 0xF1
    PUZZLE_REPLY = 0xF2
    KEY_TRANSPORT = 0xF3


class Mode(IntEnum):
    """The two flavours of §4 and §6 (the standard handshake is the absence of a mode)."""

    CLIENT_AUTH = 1
    PUZZLE = 2


@dataclass(frozen=True)
class KeyTransport:
    encrypted_premaster: bytes
    signature: OnlineOfflineSignature


def _mode(raw: int) -> Mode:
    try:
        return Mode(raw)
    except ValueError:
        raise DecodeError(f"unknown reverse SSL mode {raw}") from None


def encode_offered_modes(modes: tuple[Mode, ...]) -> bytes:
    w = Writer()
    w.push_vector(1, bytes(int(m) for m in modes))
    return w.getvalue()


def decode_offered_modes(data: bytes) -> tuple[Mode, ...]:
    """The client's list; unknown modes are skipped (a newer client may offer more)."""
    buf = Buffer(data)
    raw = buf.pull_vector(1, 1)
    buf.expect_end("reverse_ssl extension")
    if len(set(raw)) != len(raw):
        raise DecodeError("duplicate reverse SSL mode")
    return tuple(Mode(b) for b in raw if b in Mode._value2member_map_)


def encode_chosen_mode(mode: Mode) -> bytes:
    return bytes([mode])


def decode_chosen_mode(data: bytes) -> Mode:
    if len(data) != 1:
        raise DecodeError("the server's reverse_ssl extension is one byte")
    return _mode(data[0])


def pull_key_transport(buf: Buffer) -> KeyTransport:
    encrypted = buf.pull_vector(2, 1)
    signature = pull_online_offline_signature(buf)
    buf.expect_end("KeyTransport")
    return KeyTransport(encrypted, signature)


def push_key_transport(msg: KeyTransport) -> bytes:
    w = Writer()
    w.push_vector(2, msg.encrypted_premaster)
    push_online_offline_signature(w, msg.signature)
    return w.getvalue()


def signed_message(transcript: bytes, encrypted_premaster: bytes) -> bytes:
    """What the server signs: a label and the hash of every prior message plus the ciphertext."""
    return b"reverse-ssl server signature\x00" + hashlib.sha256(transcript + encrypted_premaster).digest()
