"""Interop tests: unmodified peers (curl, openssl, Python ssl, pyOpenSSL, GnuTLS, nginx, Squid)
against the testbed over loopback; helpers in ``tls_peers``, ``split_*``, ``squid_helpers``."""
