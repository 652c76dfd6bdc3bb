"""The recipe's optional `transparency:` section: what the EU AI Act "Public Summary of Training Content"
(`curation.report.ai_act`) needs that no ledger query can know: who provides which model, the crawler's
name, when the data was collected, and which sources are licensed or synthetic.

It describes the publication, not the data, so it is in no fingerprint (`exclude=True` on
`Recipe.transparency`): shards, plans and the recipe fingerprint are the same with or without it. A field
left unset is written as "not declared in the recipe" in the summary, never guessed.

    transparency:
      provider: Example Lab
      provider_contact: data@example.org
      model: example-8b
      model_version: "1.0"
      crawler: ExampleBot/1.0
      collection_period: {start: 2023-06-01, end: 2025-01-15}
      sources: {web_en: publicly_available, web_warc: crawled, speech: licensed}
"""
from __future__ import annotations

from datetime import date
from typing import Literal

from pydantic import model_validator

from curation.recipe.base import Strict

# the template's categories of data source (section 2), as the recipe names them; `user` data is not
# offered: curate reads no user interactions, and the summary says "none" for that category
ORIGINS = ("publicly_available", "crawled", "licensed", "synthetic")
Origin = Literal["publicly_available", "crawled", "licensed", "synthetic"]


class Period(Strict):
    start: date
    end: date

    @model_validator(mode="after")
    def _ordered(self):
        if self.end < self.start:
            raise ValueError(f"collection_period: end {self.end} is before start {self.start}")
        return self


class Transparency(Strict):
    provider: str | None = None            # the general-purpose AI model's provider (template 1.1)
    provider_contact: str | None = None
    model: str | None = None               # the model's name (template 1.2) ...
    model_version: str | None = None       # ... and version
    crawler: str | None = None             # name (user agent) of the provider's crawler (template 2.3)
    collection_period: Period | None = None  # when the crawled data was collected (template 2.3)
    # a source's category in template section 2, where the default is wrong: by default a source that
    # curate fetched from a URL list (`acquire.kind: urls`) is `crawled`, one of synthetic task examples
    # (`synthetic_tasks`) `synthetic`, every other `publicly_available`; `licensed` is only ever declared
    sources: dict[str, Origin] = {}

    def fields(self) -> list[tuple[str, str | None]]:
        """(field, value) of the general fields, in template order; None where unset."""
        period = self.collection_period
        return [("provider", self.provider), ("provider_contact", self.provider_contact), ("model", self.model),
                ("model_version", self.model_version), ("crawler", self.crawler),
                ("collection_start", period.start.isoformat() if period else None),
                ("collection_end", period.end.isoformat() if period else None)]
