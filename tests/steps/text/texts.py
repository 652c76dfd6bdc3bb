"""Texts for the fast-filter equivalence tests: the benchmark corpora and adversarial strings."""
from __future__ import annotations

import gzip
import json
import math
import os

import pytest

from tests.conftest import SHARED_DATA

WEB_TEXT = SHARED_DATA / "web_text"
# (file, datatrove language) of every text-bearing JSONL file in ../shared/data/web_text
CORPORA = [("news_articles_en.jsonl.gz", "eng"), ("cc_main_2019_30_extract.jsonl.gz", "eng"),
           ("c4_en_sample.jsonl.gz", "eng"), ("c4_100_domains_theguardian_sample.jsonl.gz", "eng"),
           ("news_articles_fundus_extracted.jsonl.gz", "eng"), ("parlspeech_sample_en.jsonl.gz", "eng"),
           ("parlspeech_sample_de.jsonl.gz", "deu"), ("parlspeech_sample_es.jsonl.gz", "spa"),
           ("parlspeech_sample_nl.jsonl.gz", "nld")]
BENCH = ["news_articles_en.jsonl.gz", "cc_main_2019_30_extract.jsonl.gz", "c4_en_sample.jsonl.gz",
         "parlspeech_sample_en.jsonl.gz"]  # the corpus of tests/benchmarks/bench_text.py


def corpus(name: str) -> list[str]:
    path = WEB_TEXT / name
    if not path.is_file():
        pytest.skip(f"{path} is absent (the real-data equivalence tests need ../shared/data/web_text)")
    texts = []
    for line in gzip.open(path, "rt", encoding="utf-8"):
        text = json.loads(line).get("text")
        if isinstance(text, str):
            texts.append(text)
    return texts


# The "every document" equivalence tests read an even sample of each corpus by default, about this many
# bytes of text (some 80,000 words), spread over the whole file; CURATE_WHOLE_CORPORA=1 gives them every
# document (the largest corpus is 9.6 MB: the whole set takes minutes, most of the full suite's real-corpus
# time). 1 MB until 2026-12-07: half of it took the splitter's and the filter chain's corpus tests from
# about 62 to 31 worker-seconds of the full suite.
SAMPLE_BYTES = 500_000
WHOLE_CORPORA = os.environ.get("CURATE_WHOLE_CORPORA") == "1"


def corpus_sample(name: str) -> list[str]:
    """Every document of `name` under CURATE_WHOLE_CORPORA=1, else every k-th one, k chosen so that about
    SAMPLE_BYTES of text is read (corpora smaller than that are read whole)."""
    texts = corpus(name)
    if WHOLE_CORPORA:
        return texts
    stride = max(1, math.ceil(sum(len(t.encode()) for t in texts) / SAMPLE_BYTES))
    return texts[::stride]


# Strings that stress spaCy's tokenizer and the sentencizer, one idea each.
ADVERSARIAL = [
    # numbers with units, decimals, thousands separators, ranges, currencies, ordinals
    "5km 10kg 3.5mm 100m² 12°C 98.6°F 45mph 2GB 1,000,000 1.000.000 3,14 12'000 10^6 1e-9 -40 +7 ±3",
    "$5 $5.99 US$10 €20 £3.50 ¥1000 5$ 20€ 10-20% 5x 3rd 21st 1990s '90s 9am 10a.m. 5p.m. 10:30 24/7",
    "Call +1 (555) 123-4567 or 555.123.4567; ISBN 978-3-16-148410-0; v2.0.1-rc1; 192.168.0.1:8080",
    # URLs and e-mail addresses
    "See https://example.com/a/b?c=d&e=f#g, http://x.y/z. (www.example.org) <mailto:a.b+c@d-e.co.uk>",
    "e-mail: first.last@example.com; @handle #hashtag ftp://files.example.net/pub/ file:///tmp/x.txt",
    # emoji, ZWJ sequences, flags, skin tones, variation selectors
    "Great 👍🏽!! 👨‍👩‍👧‍👦 family 🏳️‍🌈 flag 🇩🇪🇫🇷 keycap 1️⃣ ❤️ ♥ ☺️ :) :-( <3 xD ^_^ (╯°□°）╯︵┻━┻",
    # CJK, Thai, Arabic, Hebrew, Devanagari, Cyrillic, Greek, mixed scripts
    "東京は日本の首都です。北京是中国的首都。서울은 한국의 수도입니다. カタカナ・ひらがな「引用」",
    "ภาษาไทยไม่มีการเว้นวรรคระหว่างคำ แต่เว้นวรรคระหว่างประโยค",
    "العربية تكتب من اليمين إلى اليسار؟ نعم! ١٢٣٤٥ والأرقام ٣٫١٤ — עברית גם כן. हिन्दी में लिखा है।",
    "Ρωσικά: Москва — столица России. Ελληνικά; mixedСкрипт wordsΑλφα 漢字kanji abcабв123",
    # combining marks, precomposed vs decomposed, zero-width characters
    "café cafe\u0301 naïve nai\u0308ve Zoë Zoe\u0308 e\u0301\u0301\u0301 Z̤͔ͧ̑̓ä͖̭̈̇lͮ̒ͫǧ̗͚̚o̙̔ͮ̇͐̇",
    "zero\u200bwidth soft\u00adhyphen join\u200dner non\u200cjoiner word\u2060joiner \ufeffbom",
    # hyphenation and dashes
    "state-of-the-art well--known co-operate re-\nentry e-mail -- — – ‐ ‑ ‒ − ⁃ x-ray -5 5- -x- ---",
    # apostrophes and quotes of all kinds
    "don't can't won't it's 'tis rock 'n' roll O'Neill boys' toys ''1980'' ``quoted'' ‘single’ “double”",
    "«guillemets» ‹single› „German“ ‚low‘ 「corner」 『white』 \"straight\" 'straight' ´acute` ′prime″",
    "He said, 'I can't.' She said: \"Why not?\" ... 'Cause. 'em 'bout y'all ma'am o'clock",
    # non-breaking and other Unicode spaces, tabs, odd line breaks
    "non\u00a0breaking\u00a0space narrow\u202fnbsp thin\u2009space em\u2003space ideographic\u3000space",
    "tab\tseparated\t\tcolumns  two  spaces   three\u2002en\u205fmath\u1680ogham\u180emongolian",
    "line\u2028separator para\u2029separator next\x85line form\x0cfeed vertical\x0btab file\x1csep\x1d\x1e\x1f",
    # lines of only punctuation, bullets, ellipses
    "!!! ??? ... …… --- *** ### ,,, ;;; ::: ((( ))) [[[ ]]] {{{ }}} <<< >>> /// \\\\ ||| ~~~ ^^^ %%%",
    "• bullet one\n• bullet two\n- dash item\n* star item\n◦ hollow\n▪ square\n‣ triangle\n· middle dot",
    "Wait... what…? Really?! Yes!!! No?!? Hmm.... Well.. ok. Fine… End.",
    # sentence boundaries the sentencizer sees
    "Mr. Smith met Dr. Jones at 5 p.m. on Jan. 3. U.S.A. vs. U.K. e.g. i.e. etc. Done. Next one!",
    "A.\"B\" C.) D.] E.' F?' G!) H.  I.\tJ.\nK.  \u00a0L. M.(n) o.p. ?! .!. .?.",
    # very long words and repeated characters
    "a" * 1200 + " " + "ab" * 700 + " supercalifragilisticexpialidocious " + "x" * 50 + ".",
    "https://example.com/" + "very-long-path/" * 80 + " " + "#" * 300 + " " + "." * 200,
    # special strings: spaCy's attribute names (but "IS_ALPHA": see test_splitter), tokenizer exceptions
    "ORTH and LIKE_URL are spaCy attribute names; so are IS_DIGIT, LEMMA and FLAG19.",
    "gonna wanna gotta lemme 'cause y'know ain't shan't o' ol' c'mon :-) :P <3 ._. (:",
]

# Whole documents: each adversarial string alone, a few combined into multi-line documents,
# and empty or whitespace-only documents.
DOCUMENTS = (
    ["", " ", "\n", "\n\n\n", "\t \u00a0 \n", "   leading and trailing   ", ".", "#", "...", "word"]
    + ADVERSARIAL
    + ["\n".join(ADVERSARIAL[i:i + 4]) for i in range(0, len(ADVERSARIAL), 4)]
    + ["\n\n".join(ADVERSARIAL[i::3]) for i in range(3)]
    + ["This sentence is fine and it has enough words to count. " * 6 + "\n" + s for s in ADVERSARIAL[:8]]
)
