"""Stream's own Python SDK against the real `ticks` binary: opt-in, run by
scripts/check-stream-sdk (Stream's licence covers only its customers, so the
default tests in tests/python speak the wire protocol themselves).

The `ticks` and `unique` fixtures are tests/python's; `client` here is the SDK's.
"""

import importlib.util
import os
import sys

import pytest

PYTHON_TESTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python")
sys.path.insert(0, PYTHON_TESTS)  # for tests/python/conftest.py's `from wire import Ticks`
_spec = importlib.util.spec_from_file_location("ticks_python_conftest", os.path.join(PYTHON_TESTS, "conftest.py"))
_shared = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_shared)

ticks = _shared.ticks
unique = _shared.unique


@pytest.fixture
def client(ticks):
    from stream_chat import StreamChat

    return StreamChat(api_key=ticks.api_key, api_secret=ticks.api_secret, base_url=ticks.base_url)
