"""Helpers for users who run a broker inside their own tests."""
