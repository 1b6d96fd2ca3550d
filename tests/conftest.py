"""Shared test settings."""

import os
import tempfile

from hypothesis import HealthCheck, settings

settings.register_profile("ci", max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("ci")

# The ledgers the tests create are remembered in a state directory of the test run, not the user's
# (child processes and the command inherit it).
os.environ["DP_PIPELINE_STATE_DIR"] = tempfile.mkdtemp(prefix="dp-pipeline-state-")
