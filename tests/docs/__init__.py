"""Tests of the documentation site."""
