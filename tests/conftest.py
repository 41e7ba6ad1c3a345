"""Hooks for the whole suite: no confluent-kafka client outlives the test that made it
(tests/client_leaks.py says why); a failed test's captured stderr is shown without
librdkafka's telemetry instance id lines (tests/librdkafka_lines.py); each test gets its
tier's marker (tests/tiers.py), and each test above the unit tier its module's xdist
group (tests/parallel.py). Hypothesis runs without its per-example deadline (200 ms by
default): that is a timing assertion, which a test on a busy machine (scripts/test runs
the unit tier at low priority beside the spark tier) fails for no fault of the code."""

import pytest
from hypothesis import settings

from tests import client_leaks, parallel
from tests.client_leaks import (  # noqa: F401 - pytest finds hooks by name
    pytest_fixture_post_finalizer,
    pytest_fixture_setup,
    pytest_runtest_teardown,
)
from tests.librdkafka_lines import pytest_runtest_makereport  # noqa: F401 - a hook, as above
from tests.tiers import pytest_collection_modifyitems  # noqa: F401 - a hook, as above

client_leaks.install()
settings.register_profile("kbroker", deadline=None)
settings.load_profile("kbroker")


# -- pytest-xdist workers (scripts/test -n 2): tests/parallel.py, a plugin of its own (its
# collection hook beside tiers')
def pytest_configure(config: pytest.Config) -> None:
    config.pluginmanager.register(parallel, "kbroker-tests-parallel")
