"""Reverse SSL's state machine: the states it adds to TLS 1.2 and the transition tables that use them.

A Reverse SSL connection *is* a :mod:`tls12` connection, so its state
machine is the core's (:class:`tls12.connection.HandshakeState` and the
:class:`tls12.handshake_table.TransitionTable` of each side) widened by
:class:`ReverseState` and a few more (state, message) entries:

Server (:data:`SERVER_TRANSITIONS`)::

    EXPECT_CLIENT_HELLO --ClientHello--> EXPECT_CLIENT_CERTIFICATE   (client-auth mode)
                                     \\-> EXPECT_PUZZLE_REPLY         (puzzle mode)
    EXPECT_CLIENT_CERTIFICATE --Certificate--> EXPECT_CHANGE_CIPHER_SPEC
    EXPECT_PUZZLE_REPLY       --PuzzleReply--> EXPECT_CHANGE_CIPHER_SPEC

Client (:data:`CLIENT_TRANSITIONS`)::

    EXPECT_SERVER_HELLO --ServerHello--> EXPECT_REVERSE_HELLO_DONE
    EXPECT_REVERSE_HELLO_DONE --PuzzleRequest--> EXPECT_REVERSE_HELLO_DONE
    EXPECT_REVERSE_HELLO_DONE --ServerHelloDone--> EXPECT_SERVER_CERTIFICATE
    EXPECT_SERVER_CERTIFICATE --Certificate--> EXPECT_KEY_TRANSPORT
    EXPECT_KEY_TRANSPORT --KeyTransport--> EXPECT_CHANGE_CIPHER_SPEC

After that the core's ChangeCipherSpec / Finished entries run unchanged.  The
connections (:mod:`~reverse_ssl.server_connection`, :mod:`~reverse_ssl.client_connection`) use these
tables as their ``TRANSITIONS``: an input a table does not list in the current
state is refused with ``unexpected_message`` (:class:`tls12.errors.UnexpectedMessage`)
and the connection closes; a handler that returns a state the entry does not
allow is a local error.  ``tests/reverse_ssl/test_rssl_state_table.py`` sends
every message type in every state to check it.

:class:`ReverseState` is registered with :func:`tls12.state.register_state_enum`
so that connections export and import in any of these states.
"""

from __future__ import annotations

from enum import Enum

from tls12.client_connection import ClientConnection
from tls12.connection import HandshakeState
from tls12.handshake_table import Transition, TransitionTable
from tls12.messages import HandshakeType, pull_certificate, pull_empty
from tls12.server_connection import ServerConnection
from tls12.state import register_state_enum

from .messages import ReverseHandshakeType, pull_key_transport
from .puzzle import pull_puzzle_reply, pull_puzzle_request

__all__ = ["ReverseState", "SERVER_TRANSITIONS", "CLIENT_TRANSITIONS"]


class ReverseState(Enum):
    """Handshake states that only Reverse SSL has (the others are :class:`tls12.connection.HandshakeState`)."""

    EXPECT_CLIENT_CERTIFICATE = "expect_client_certificate"
    EXPECT_PUZZLE_REPLY = "expect_puzzle_reply"
    EXPECT_REVERSE_HELLO_DONE = "expect_reverse_hello_done"
    EXPECT_SERVER_CERTIFICATE = "expect_server_certificate"
    EXPECT_KEY_TRANSPORT = "expect_key_transport"


register_state_enum(ReverseState)

#: The server's table: the core's, plus the client's certificate or puzzle reply after ClientHello.
SERVER_TRANSITIONS: TransitionTable = ServerConnection.TRANSITIONS.extend(
    {
        (ReverseState.EXPECT_CLIENT_CERTIFICATE, HandshakeType.CERTIFICATE): Transition(
            "_handle_client_certificate", (HandshakeState.EXPECT_CHANGE_CIPHER_SPEC,), parse=pull_certificate
        ),
        (ReverseState.EXPECT_PUZZLE_REPLY, ReverseHandshakeType.PUZZLE_REPLY): Transition(
            "_handle_puzzle_reply", (HandshakeState.EXPECT_CHANGE_CIPHER_SPEC,), parse=pull_puzzle_reply
        ),
    },
    more_next_states={
        (HandshakeState.EXPECT_CLIENT_HELLO, HandshakeType.CLIENT_HELLO): (
            ReverseState.EXPECT_CLIENT_CERTIFICATE,
            ReverseState.EXPECT_PUZZLE_REPLY,
        )
    },
)

#: The client's table: the core's, plus the reverse flight (puzzle, hello done, certificate, key).
CLIENT_TRANSITIONS: TransitionTable = ClientConnection.TRANSITIONS.extend(
    {
        (ReverseState.EXPECT_REVERSE_HELLO_DONE, ReverseHandshakeType.PUZZLE_REQUEST): Transition(
            "_handle_puzzle_request", (ReverseState.EXPECT_REVERSE_HELLO_DONE,), parse=pull_puzzle_request
        ),
        (ReverseState.EXPECT_REVERSE_HELLO_DONE, HandshakeType.SERVER_HELLO_DONE): Transition(
            "_handle_reverse_hello_done", (ReverseState.EXPECT_SERVER_CERTIFICATE,), parse=pull_empty
        ),
        (ReverseState.EXPECT_SERVER_CERTIFICATE, HandshakeType.CERTIFICATE): Transition(
            "_handle_reverse_certificate", (ReverseState.EXPECT_KEY_TRANSPORT,), parse=pull_certificate
        ),
        (ReverseState.EXPECT_KEY_TRANSPORT, ReverseHandshakeType.KEY_TRANSPORT): Transition(
            "_handle_key_transport", (HandshakeState.EXPECT_CHANGE_CIPHER_SPEC,), parse=pull_key_transport
        ),
    },
    more_next_states={
        (HandshakeState.EXPECT_SERVER_HELLO, HandshakeType.SERVER_HELLO): (ReverseState.EXPECT_REVERSE_HELLO_DONE,)
    },
)
