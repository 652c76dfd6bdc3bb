"""The README's description of recipes/demo.yaml's text pipeline says what the recipe does (issue 22.11:
it named toxicity, quality scoring and top-fraction selection, which only recipes/text.yaml runs)."""
from __future__ import annotations

from curation.recipe import load_recipe
from tests.conftest import REPO


def _features(name: str) -> dict[str, bool]:
    r = load_recipe(REPO / "recipes" / name, resolve_inputs=False).recipe
    types = {f.type for s in r.sources if s.modality == "text" for f in s.filters}
    return {"toxicity": "toxicity" in types, "quality": "quality" in types,
            "select": any(getattr(s, "select", None) for s in r.sources),
            "best_scored": r.dedup is not None and r.dedup.minhash is not None
            and r.dedup.minhash.keep == "highest_quality"}


def _demo_text_paragraph() -> str:
    readme = (REPO / "README.md").read_text()
    section = readme[readme.index("## What the demo does"):]
    start = section.index("Text: read")
    return " ".join(section[start:section.index("Images:", start)].split())


def test_the_readme_describes_the_demo_text_pipeline_truly():
    demo, text = _features("demo.yaml"), _features("text.yaml")
    para = _demo_text_paragraph()
    pipeline, _, elsewhere = para.partition("`recipes/text.yaml`")
    words = {"toxicity": "toxicity classifier", "quality": "quality score", "select": "top-fraction selection",
             "best_scored": "best-scored page"}
    for feature, phrase in words.items():
        if demo[feature]:
            assert phrase in pipeline, f"demo.yaml runs {feature}; the README's demo pipeline omits {phrase!r}"
        else:
            assert phrase not in pipeline, f"the README says demo.yaml runs {phrase!r}; it does not"
            if text[feature]:
                assert phrase in elsewhere, f"the README should say {phrase!r} is in recipes/text.yaml"
