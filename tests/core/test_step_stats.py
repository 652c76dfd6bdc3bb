"""StepStats sum over shards: every count adds, zero counts survive, and steps never mix."""
from collections import Counter

import pytest

from curation.core.record import StepStats


def test_sum_of_two_shards_keeps_every_count_and_balances():
    a = StepStats("gopher", 10, 6, Counter(short=3), Counter(bad_utf8=1), 0.5, Counter(pii_email=2))
    b = StepStats("gopher", 5, 5, Counter(short=0), Counter(), 0.25, Counter())
    total = a + b
    assert (total.records_in, total.records_out, total.seconds) == (15, 11, 0.75)
    assert total.dropped == Counter(short=3) and "short" in total.dropped      # a zero count kept, not dropped
    assert total.quarantined == Counter(bad_utf8=1) and total.notes == Counter(pii_email=2)
    assert total.balanced() and a.dropped == Counter(short=3)                   # operands unchanged
    assert StepStats.from_json(total.to_json()) == total


def test_counts_of_different_steps_are_refused():
    with pytest.raises(ValueError, match="'dedup' to those of 'gopher'"):
        StepStats("gopher") + StepStats("dedup")
