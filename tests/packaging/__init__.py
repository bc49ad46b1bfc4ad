"""Packaging: console scripts, the optional extras, the wheel built and installed outside the
repository."""
