"""Hooks for the whole suite: no confluent-kafka client outlives the test that made it
(tests/client_leaks.py says why)."""

from tests import client_leaks
from tests.client_leaks import (  # noqa: F401 - pytest finds hooks by name
    pytest_fixture_post_finalizer,
    pytest_fixture_setup,
    pytest_runtest_teardown,
)

client_leaks.install()
