"""`input.format: warc|html` in recipes: settings that apply, settings that do not, defaults."""
from __future__ import annotations

import pytest
from pydantic import ValidationError

from curation.recipe.schema import Source
from curation.steps.text.readers.inputs import Limits, limits_for


def source(**inp) -> Source:
    return Source.model_validate({"name": "web", "license": "CC-BY-4.0", "input": {"paths": ["x"], **inp}})


def test_web_formats_and_their_settings_validate():
    s = source(format="warc", extract={"favor": "precision", "include_tables": False})
    assert s.input.extract.favor == "precision" and s.input.pages is None
    h = source(format="html", pages={"index": "ground_truth.jsonl", "url_field": "link"}, id_field="page_id",
               metadata_fields=["crawl_date"], max_record_bytes=4 << 20)
    assert h.input.pages.index == "ground_truth.jsonl" and h.input.max_record_bytes == 4 << 20


@pytest.mark.parametrize("inp,message", [
    ({"format": "jsonl", "extract": {}}, "applies to `format: warc` or `html`"),
    ({"format": "warc", "pages": {}}, "applies to `format: html`"),
    ({"format": "warc", "text_field": "body"}, "does not apply to `format: warc`"),
    ({"format": "html", "turn_roles": True}, "does not apply to `format: html`"),
    ({"format": "warc", "id_field": "id"}, "WARC-Record-ID"),
    ({"format": "warc", "extract": {"favor": "speed"}}, "favor"),
    ({"max_record_bytes": 10}, "max_record_bytes"),
    ({"decompression": {"max_ratio": 2}}, "max_ratio"),
])
def test_settings_that_do_not_apply_are_errors(inp, message):
    with pytest.raises(ValidationError, match=message):
        source(**inp)


def test_web_inputs_are_text_sources():
    with pytest.raises(ValidationError, match="yields text documents"):
        Source.model_validate({"name": "web", "modality": "audio", "input": {"format": "warc", "paths": ["x"]}})


def test_recipe_limits_reach_the_readers():
    assert limits_for(source().input) == Limits()
    got = limits_for(source(max_record_bytes=2048, decompression={"max_bytes": 2**30, "max_ratio": 50}).input)
    assert (got.max_record_bytes, got.max_decompressed_bytes, got.max_ratio) == (2048, 2**30, 50)
