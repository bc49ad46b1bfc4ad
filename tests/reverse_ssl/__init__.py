"""Tests of Reverse SSL (:mod:`reverse_ssl`); shared keys and configurations in ``rssl_helpers``."""
