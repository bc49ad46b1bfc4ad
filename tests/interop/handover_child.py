"""Child process of ``test_state_handover``: continue a TLS connection from an exported state.

Run from the repository root as ``python -m tests.interop.handover_child --fd N --cert C
--key K --suite S --size N --offset N`` with the ``export_state()`` blob on stdin.  It
rebuilds the connection with ``ServerConnection.import_state``, sends the rest of the
response body on the inherited socket, answers one more request, sends close_notify and
exits 0.
"""

from __future__ import annotations

import argparse
import socket
import sys

from tests.interop.tls_peers import file_bytes
from tls12 import ServerConfig, ServerConnection
from tls12.certs import load_credentials
from tls12.events import ApplicationData

RECORD = 16384
SECOND_BODY = b"second response, sent by another process\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fd", type=int, required=True, help="inherited socket file descriptor")
    parser.add_argument("--cert", required=True)
    parser.add_argument("--key", required=True)
    parser.add_argument("--suite", type=int, required=True, help="cipher suite number")
    parser.add_argument("--size", type=int, required=True, help="size of the whole body")
    parser.add_argument("--seed", type=int, required=True, help="seed of the body (tls_peers.file_bytes)")
    parser.add_argument("--offset", type=int, required=True, help="body bytes already sent by the parent")
    args = parser.parse_args()
    blob = sys.stdin.buffer.read()
    config = ServerConfig(credentials=load_credentials(args.cert, args.key), cipher_suites=(args.suite,))
    conn = ServerConnection.import_state(config, blob)
    body = file_bytes(args.size, seed=args.seed)
    with socket.socket(fileno=args.fd) as sock:
        sock.settimeout(30)
        for start in range(args.offset, len(body), RECORD):
            conn.send_data(body[start : start + RECORD])
            sock.sendall(conn.data_to_send())
        request = b""
        while b"\r\n\r\n" not in request:
            data = sock.recv(65536)
            if not data:
                raise ConnectionError("client left before its second request")
            request += b"".join(e.data for e in conn.receive_data(data) if isinstance(e, ApplicationData))
        if not request.startswith(b"GET /second "):
            raise AssertionError(f"unexpected second request {request[:80]!r}")
        conn.send_data(
            b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s" % (len(SECOND_BODY), SECOND_BODY)
        )
        conn.close()
        sock.sendall(conn.data_to_send())
    return 0


if __name__ == "__main__":
    sys.exit(main())
