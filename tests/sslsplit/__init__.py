"""Tests of SSL splitting (:mod:`sslsplit`); in-memory server -> splicer -> client chains
in ``split_helpers``."""
