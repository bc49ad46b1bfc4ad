"""Tests that execute notebooks headless and check what they show."""
