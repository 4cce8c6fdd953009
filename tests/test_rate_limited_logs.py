"""shared.logs.RateLimitedWarnings: one line per cause per interval, the next one counting
what was left out, and a cleared cause logged again at once."""

from __future__ import annotations

import logging

from shared.logs import RateLimitedWarnings


def test_one_warning_per_cause_per_interval(caplog):
    now = [1000.0]
    warnings = RateLimitedWarnings(logging.getLogger("aokun.test"), every_s=60, clock=lambda: now[0])
    caplog.set_level(logging.WARNING, logger="aokun.test")
    for i in range(100):
        warnings.warning("refused", "could not queue %d stage(s): refused", i)
        warnings.warning("timed out", "could not queue %d stage(s): timed out", i)
        now[0] += 0.5  # 50 s in all
    assert [r.getMessage() for r in caplog.records] == ["could not queue 0 stage(s): refused",
                                                        "could not queue 0 stage(s): timed out"]
    now[0] += 10
    caplog.clear()
    assert warnings.warning("refused", "could not queue %d stage(s): refused", 7)
    assert [r.getMessage() for r in caplog.records] == [
        "could not queue 7 stage(s): refused (99 more like it in the last 60 s not logged)"]
    assert warnings.clear() and not warnings.clear()
    assert warnings.warning("refused", "refused again")
