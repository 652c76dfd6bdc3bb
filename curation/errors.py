"""One error hierarchy for `curate`.

Every message names the thing (file, record id, recipe key path), the rule that failed,
the offending value and what to do about it. The CLI prints `CurateError`s without a
traceback and exits with the status its class maps to (`curation.commands.console`: 1 in general,
3 for a `RecipeError`, 4 for a `VerifyError`); anything else is a bug in `curate` (status 70).
"""


class CurateError(Exception):
    """Base class: a problem the user can fix (bad recipe, bad input, failed check)."""


class UsageError(CurateError):
    """Arguments that parse but do not make sense (an unknown ledger table, an --out that cannot be written)."""


class RecipeError(CurateError):
    """The recipe is malformed: wrong type, unknown key or step, out-of-range value."""


class InputError(CurateError):
    """An input named by the recipe cannot be read at all (missing, not a file, no permission)."""


class RecordError(CurateError):
    """A single record is unusable; steps raise it and the runtime applies `on_error`."""

    def __init__(self, reason: str, detail: str = ""):
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason
        self.detail = detail


class ConservationError(CurateError):
    """A step's counts do not add up: in != out + dropped + quarantined."""


class StepFailed(CurateError):
    """A step raised on a record while its `on_error` policy is `raise`."""


class VerifyError(CurateError):
    """A manifest does not match the files on disk or the ledger."""



class RunFailed(CurateError):
    """A run completed its tasks but its result must not be trained on (a source kept nothing, or too
    much of it was quarantined); the ledger and report are written, the manifests are not."""


class DecontaminationGuard(CurateError):
    """Decontamination would remove more of a source than the recipe's cap allows."""
