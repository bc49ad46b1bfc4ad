"""Tests of WebALPS (:mod:`webalps_sim`)."""
