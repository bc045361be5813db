"""`detect watch -- CMD` ends as the command does: its exit status is perflearn's."""

from __future__ import annotations

import pytest

from perflearn.detect.model import Detector
from perflearn.detect.watch import watch
from perflearn.errors import CommandFailed

pytestmark = pytest.mark.parallel  # computes only: `make test` runs it on every core at once


def _never_full() -> Detector:
    """A detector whose window never fills in these tests' seconds: it classifies nothing."""
    return Detector(None, None, [], 0.05, 10_000, [])


@pytest.mark.parametrize("script,code", [("exit 3", 3), ("sleep 0.3; exit 4", 4), ("kill -9 $$", 137)])
def test_a_failing_command_is_the_watch_s_failure(script, code):
    with pytest.raises(CommandFailed) as failed:
        list(watch(_never_full(), command=["sh", "-c", script]))
    assert failed.value.exit_code == code and "sh ended with" in str(failed.value)


def test_a_command_that_succeeds_too_soon_to_classify_says_so():
    from perflearn.errors import UsageError

    with pytest.raises(UsageError, match="less than one window"):
        list(watch(_never_full(), command=["sh", "-c", "exit 0"]))
