"""A record's own licence, read from whatever shape its licence field has, failing closed.

`field_value(meta, field)` finds the field (`a.b` reaches into an object); `licences_in(value, where)`
lists every licence the value holds as `(where, Verdict)` pairs, each classed by
`licence_text.classify`. The shapes read:

- a string: a licence (`"CC-BY-NC-4.0"`, a URL, free text); a string that is a JSON object or list
  (Parquet exports often serialise them) is read as that object or list;
- a list: every element (strings or objects), e.g. a Hugging Face card's `license: [mit, cc-by-4.0]`;
- an object: the licence-named keys when there are any (`license`, `licenses`, `spdx_id`,
  `license_url`, ... as in `{"license": ..., "url": ...}`, Frictionless `{"licenses": [{"name": ...}]}`,
  GitHub's `{"key", "name", "spdx_id"}`); else generic name keys (`name`, `id`, `abbr`, ... as in C5's
  `potential_licenses: {abbr: [...], version: [...]}`); else URL keys (`url`, `path`, `href`); else
  the keys themselves are licence labels, as in dolma's Common Crawl licence spans
  `{"cc_re__cc_re__cc_by_sa_3_0": [[start, end, score]], ...}` (every label counts, whatever its score).

Every licence found counts; the caller keeps the most restrictive. What cannot be read fails closed
to `unknown`, never to the source's licence: an empty string, list or object, a number, a value
nested deeper than MAX_DEPTH or holding more than MAX_LICENCES licences. A record without the
field, or with null in it (Arrow and Parquet cannot tell the two apart), has no licence of its own:
`field_value` returns ABSENT and the source's licence applies.
"""
from __future__ import annotations

import json
import re
from typing import Any

from curation.steps.compliance.licence_text import Verdict, classify

ABSENT = object()
MAX_DEPTH = 8
MAX_LICENCES = 256

_NAMED = {"license", "licence", "licenses", "licences", "license_id", "licence_id", "license_name",
          "licence_name", "license_abbr", "licence_abbr", "license_key", "license_expression",
          "licence_expression", "license_spdx", "spdx", "spdx_id", "spdxid", "spdx_license_key",
          "spdx_license_id", "spdx_expression", "license_url", "licence_url", "license_uri", "license_link",
          "licence_link", "rights", "dc:rights", "dcterms:license", "cc:license", "schema:license"}
_GENERIC = {"name", "id", "key", "abbr", "identifier", "type", "value", "title", "label", "code"}
_URLS = {"url", "uri", "href", "link", "path", "@id"}


class _TooMany(Exception):
    pass


def _key(k: Any) -> str:
    return re.sub(r"[\s-]+", "_", str(k).strip().lower())


def field_value(meta: dict, field: str) -> Any:
    """`meta[field]`, or for `a.b` `meta["a"]["b"]`; ABSENT when the record has no such field or null; an
    `unknown` Verdict when the path runs into something that is not an object."""
    if field in meta:
        return ABSENT if meta[field] is None else meta[field]
    head, _, rest = field.partition(".")
    if not rest or meta.get(head) is None:
        return ABSENT
    node = meta[head]
    for part in rest.split("."):
        if isinstance(node, str) and node.strip()[:1] == "{":
            node = _json(node)
        if not isinstance(node, dict):
            return Verdict("unknown", repr(node)[:200], f"not an object, so it holds no {part!r}")
        if node.get(part) is None:
            return ABSENT
        node = node[part]
    return node


def _json(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


def _add(out: list, where: str, verdict: Verdict) -> None:
    if len(out) >= MAX_LICENCES:
        raise _TooMany
    out.append((where, verdict))


def _collect(value: Any, where: str, depth: int, out: list) -> None:
    if depth > MAX_DEPTH:
        return _add(out, where, Verdict("unknown", "…", f"nested deeper than {MAX_DEPTH} levels"))
    if isinstance(value, Verdict):
        return _add(out, where, value)
    if hasattr(value, "tolist") and not isinstance(value, (str, bytes)):  # numpy arrays from Arrow
        value = value.tolist()
    if isinstance(value, str):
        if value.strip()[:1] in ("{", "[") and not isinstance(parsed := _json(value.strip()), str):
            return _collect(parsed, where, depth + 1, out)
        return _add(out, where, classify(value))
    if isinstance(value, (list, tuple)):
        if not value:
            return _add(out, where, Verdict("unknown", "[]", "empty list"))
        for i, item in enumerate(value):
            _collect(item, f"{where}[{i}]", depth + 1, out)
        return None
    if isinstance(value, dict):
        if not value:
            return _add(out, where, Verdict("unknown", "{}", "empty object"))
        keys = {_key(k): k for k in value}
        for group in (_NAMED, _GENERIC, _URLS):
            chosen = [keys[k] for k in keys if k in group]
            if chosen:
                for k in chosen:
                    _collect(value[k], f"{where}.{k}", depth + 1, out)
                return None
        for k in value:  # no known key: the keys are the licence labels (dolma's licence spans)
            _add(out, where, classify(str(k)))
        return None
    if value is None:
        return _add(out, where, Verdict("unknown", "null", "null inside a licence field"))
    return _add(out, where, Verdict("unknown", repr(value)[:200], f"a {type(value).__name__} is no licence"))


def licences_in(value: Any, where: str) -> list[tuple[str, Verdict]]:
    """Every licence `value` holds, with where it was found; never empty (see the module docstring)."""
    out: list[tuple[str, Verdict]] = []
    try:
        _collect(value, where, 0, out)
    except _TooMany:
        return [(where, Verdict("unknown", "…", f"more than {MAX_LICENCES} licences in one field"))]
    return out
