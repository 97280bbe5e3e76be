"""Verification: exactly-once checks against a golden run."""
