"""`source_failures`: which ledger rows make a run fail, tested on hand-made rows."""
from types import SimpleNamespace

from curation.ledger.health import source_failures


def _recipe(share=0.5):
    return SimpleNamespace(sources=[SimpleNamespace(name="photos", max_quarantine_share=share, allow_empty=False)])


def _rows(read, kept, acquisition):
    return {"steps": [{"source": "photos", "position": 0, "records_in": read}],
            "tokens": [{"source": "photos", "pool": "main", "documents": kept}],
            "quarantine": [], "drops": [], "acquisition": acquisition}


def test_items_refused_at_acquisition_count_as_quarantined_units():
    acq = [{"source": "photos", "kind": "image_folder", "outcome": "ok", "reason": None, "items": 2},
           {"source": "photos", "kind": "image_folder", "outcome": "refused", "reason": "link_outside_input", "items": 8}]
    [problem] = source_failures(_recipe(), _rows(read=2, kept=2, acquisition=acq))
    assert "8 of 10 input units quarantined" in problem and "refused:link_outside_input (8)" in problem
    assert source_failures(_recipe(share=0.9), _rows(read=2, kept=2, acquisition=acq)) == []


def test_urls_the_network_guard_refused_are_policy_not_quarantine():
    acq = [{"source": "photos", "kind": "urls", "outcome": "ok", "reason": None, "items": 2},
           {"source": "photos", "kind": "urls", "outcome": "refused", "reason": "blocklist", "items": 8}]
    assert source_failures(_recipe(), _rows(read=2, kept=2, acquisition=acq)) == []
