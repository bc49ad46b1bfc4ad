"""Tests of SINE (:mod:`sine`); site fixtures in ``sine_helpers``."""
