"""`fix_text_lines` gives ftfy.fix_text's result (issue 22.7: it avoids ftfy's copies of a large text)."""
from __future__ import annotations

import ftfy
import pytest

from curation.steps.text.normalize import fix_text_lines
from tests.steps.text.texts import BENCH, DOCUMENTS, corpus

CONFIG = ftfy.TextFixerConfig(normalization=None, uncurl_quotes=False, explain=False)
MOJIBAKE = ["âœ” No problems", "&macr;\\_(ã\x83\x84)_/&macr;", "Broken text&hellip; it&#x2019;s ﬂubberiﬁc!",
            "ＬＯＵＤ　ＮＯＩＳＥＳ", "cafÃ©\nfine line\n<b>&amp;</b> then &amp; again\nSchÃ¶ne GrÃ¼ÃŸe",
            "\r\nwindows\r\nlines\u2028and\x85more", "x" * 2_000_100 + "Ã©"]   # a line over max_decode_length


@pytest.mark.parametrize("text", DOCUMENTS + MOJIBAKE, ids=range(len(DOCUMENTS) + len(MOJIBAKE)))
def test_same_as_ftfy(text):
    assert fix_text_lines(text, CONFIG) == ftfy.fix_text(text, config=CONFIG)


def test_an_unchanged_text_is_returned_itself():
    text = "A clean line.\nAnother one, with ü and ’ quotes.\n" * 100
    assert fix_text_lines(text, CONFIG) is text


@pytest.mark.slow
@pytest.mark.parametrize("name", BENCH[:2])
def test_same_as_ftfy_on_the_benchmark_corpora(name):
    texts = corpus(name)[:300]
    assert [fix_text_lines(t, CONFIG) for t in texts] == [ftfy.fix_text(t, config=CONFIG) for t in texts]
