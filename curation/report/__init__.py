"""Run reports: Markdown + HTML tables and plots."""
from curation.report.render import write_report

__all__ = ["write_report"]
