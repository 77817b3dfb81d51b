"""Stream's current Python SDK (`getstream`, API v2) against the real `ticks`
binary, on SQLite and, with TICKS_TEST_POSTGRES_URL, on PostgreSQL: opt-in,
run by scripts/check-stream-sdk in a virtual environment of its own (the
SDK's licence covers only Stream's customers; tests/python speaks the wire
protocol itself and checks v2's shapes against the OpenAPI document's
schemas).

The SDK is used as a new user would: `Stream(api_key, api_secret,
base_url=…)`, its server token (no claims), its models. Every call runs with
RuntimeWarning as an error, so a required field missing from an answer (the SDK
warns and goes on) fails the test.
"""

import importlib.util
import os
import sys
import warnings

import pytest

PYTHON_TESTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python")
sys.path.insert(0, PYTHON_TESTS)  # for tests/python/conftest.py's `from wire import Ticks`
_spec = importlib.util.spec_from_file_location("ticks_python_conftest", os.path.join(PYTHON_TESTS, "conftest.py"))
_shared = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_shared)

unique = _shared.unique


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def ticks(request, tmp_path_factory):
    with _shared.served(request.param, "getstream", tmp_path_factory) as process:
        yield process


@pytest.fixture
def client(ticks):
    from getstream import Stream

    return Stream(api_key=ticks.api_key, api_secret=ticks.api_secret, base_url=ticks.base_url)


@pytest.fixture(autouse=True)
def warnings_fail():
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        yield
