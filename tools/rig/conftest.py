import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from rig import Holdcall  # noqa: E402


@pytest.fixture(scope="module")
def holdcall():
    """A Holdcall of the module's own (fresh home, runtime dir and daemon), stopped at the end.

    It starts with no rules, so every call is allowed: the allow-all policy."""
    instance = Holdcall()
    try:
        yield instance
    finally:
        instance.close()
