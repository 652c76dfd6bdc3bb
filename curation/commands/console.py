"""How every `curate` command meets the terminal: exit codes, `-v/--verbose`, `--quiet` and `--log FILE`.

Exit codes (one per kind of failure, so a script can tell a failed `verify` from a typo):

    0    success
    1    the command failed: bad input data, a failed check during a run, a failed task
    2    usage error: unknown command or option, a bad option value (argparse's own code)
    3    invalid recipe (`RecipeError`): the message names the file, line and key path
    4    verification failed (`VerifyError`): a manifest, shard or ledger does not match
    70   internal error: a bug in curate (the traceback is printed; please report it)
    130  interrupted (Ctrl-C); completed tasks are kept, a re-run finishes the rest

`--log FILE` appends everything the command prints (stdout and stderr) to FILE, plus the full
traceback of a failure, between a header naming the command and a footer with its exit code.
"""
from __future__ import annotations

import argparse
import logging
import sys
import traceback
from contextlib import ExitStack, redirect_stderr, redirect_stdout
from dataclasses import dataclass

from curation import __version__
from curation.core.faults import describe, operator_fault
from curation.errors import CurateError, RecipeError, UsageError, VerifyError

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_RECIPE, EXIT_VERIFY, EXIT_BUG, EXIT_INTERRUPTED = 0, 1, 2, 3, 4, 70, 130

EXIT_CODES_HELP = """exit codes:
  0    success
  1    the command failed (bad input data, a failed check during a run, a failed task)
  2    usage error (unknown command or option, bad option value)
  3    invalid recipe (the message names the file, line and key path)
  4    verification failed (manifest, shards or ledger do not match)
  70   internal error: a bug in curate (traceback printed; please report it)
  130  interrupted; completed tasks are kept, re-run to finish

every command takes -v/--verbose (tracebacks, more detail; -vv: debug logging), -q/--quiet (no
progress or notes on stderr; results and errors still print) and --log FILE (append what the
command prints, and the traceback of a failure, to FILE)."""


def exit_code(error: BaseException) -> int:
    """The exit status for an exception raised by a command."""
    if isinstance(error, UsageError):
        return EXIT_USAGE
    if isinstance(error, RecipeError):
        return EXIT_RECIPE
    if isinstance(error, VerifyError):
        return EXIT_VERIFY
    if isinstance(error, CurateError):
        return EXIT_FAILED
    if isinstance(error, KeyboardInterrupt):
        return EXIT_INTERRUPTED
    return EXIT_BUG


def add_common_options(parser: argparse.ArgumentParser, top: bool) -> None:
    """-v/--verbose, -q/--quiet and --log on `parser`. Subcommands get them with suppressed defaults,
    so `curate -v run ...` and `curate run ... -v` both work (a subparser's default would otherwise
    overwrite the value given before the command). An option the parser already has is left alone."""
    have = parser._option_string_actions   # noqa: SLF001 - argparse has no public "has option" query
    default = (lambda v: v) if top else (lambda v: argparse.SUPPRESS)
    group = parser.add_mutually_exclusive_group()
    if "--verbose" not in have:
        group.add_argument("-v", "--verbose", action="count", default=default(0),
                           help="tracebacks of failures and more detail (-vv: debug logging)")
    if "--quiet" not in have:
        group.add_argument("-q", "--quiet", action="store_true", default=default(False),
                           help="no progress or notes on stderr; results and errors still print")
    if "--log" not in have:
        parser.add_argument("--log", metavar="FILE", default=default(None),
                            help="append what the command prints, and tracebacks of failures, to FILE")


def add_common_options_everywhere(parser: argparse.ArgumentParser) -> None:
    """The common options on the top-level parser and on every (nested) subcommand."""
    add_common_options(parser, top=True)

    def walk(p: argparse.ArgumentParser) -> None:
        for action in p._actions:   # noqa: SLF001
            if isinstance(action, argparse._SubParsersAction):   # noqa: SLF001
                for child in dict.fromkeys(action.choices.values()):   # aliases map to the same parser
                    if not any(isinstance(a, argparse._SubParsersAction) for a in child._actions):
                        add_common_options(child, top=False)
                    walk(child)
    walk(parser)


class _Tee:
    """A text stream that writes to the terminal stream and to the log file. It says it is no
    terminal, so progress is printed as plain lines rather than redrawn bars in the log."""

    def __init__(self, stream, log):
        self._stream, self._log = stream, log

    def write(self, text: str) -> int:
        self._stream.write(text)
        self._log.write(text)
        return len(text)

    def flush(self) -> None:
        self._stream.flush()
        self._log.flush()

    def isatty(self) -> bool:
        return False

    def __getattr__(self, name):   # encoding, errors, fileno, ... of the terminal stream
        return getattr(self._stream, name)


class _StderrHandler(logging.Handler):
    """Writes to whatever `sys.stderr` is at the time (the --log tee, pytest's capture)."""

    def emit(self, record: logging.LogRecord) -> None:
        sys.stderr.write(self.format(record) + "\n")


@dataclass
class Session:
    """One command's output settings; `run(fn, args)` calls the command and maps what it raises."""
    verbose: int = 0
    quiet: bool = False
    log_path: str | None = None

    def run(self, fn, args, argv: list[str]) -> int:
        with ExitStack() as stack:
            log = None
            if self.log_path:
                try:
                    log = stack.enter_context(open(self.log_path, "a", encoding="utf-8"))
                except OSError as e:
                    print(f"curate: error: --log {self.log_path}: cannot open for writing ({e.strerror})",
                          file=sys.stderr)
                    return EXIT_USAGE
                from curation.ledger.environment import utc_now
                log.write(f"==> {utc_now()} curate {__version__}: curate {' '.join(argv)}\n")
                stack.enter_context(redirect_stdout(_Tee(sys.stdout, log)))
                stack.enter_context(redirect_stderr(_Tee(sys.stderr, log)))
            self._configure_logging()
            code = self._call(fn, args, log)
            if log is not None:
                sys.stdout.flush()
                log.write(f"<== exit {code}\n")
            return code

    def _configure_logging(self) -> None:
        """The `curation` loggers to stderr (so into --log too): warnings by default, errors only with
        --quiet, info with -v, debug with -vv. The root logger and other libraries' are left alone."""
        log = logging.getLogger("curation")
        log.setLevel(logging.ERROR if self.quiet else logging.DEBUG if self.verbose > 1 else
                     logging.INFO if self.verbose else logging.WARNING)
        if not any(isinstance(h, _StderrHandler) for h in log.handlers):
            handler = _StderrHandler()
            handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
            log.addHandler(handler)

    def _call(self, fn, args, log) -> int:
        try:
            return fn(args)
        except BrokenPipeError:   # output piped into `head` and the like: stop quietly
            sys.stderr.close()
            return EXIT_OK
        except KeyboardInterrupt:
            self._trace(log)
            print("curate: interrupted; completed tasks are kept, re-run to finish", file=sys.stderr)
            return EXIT_INTERRUPTED
        except CurateError as e:
            self._trace(log)
            print(f"curate: error: {_task_fault(e)}", file=sys.stderr)
            return exit_code(e)
        except Exception as e:   # noqa: BLE001 - a bug (exit 70), unless it is an operator fault (exit 1)
            fault = operator_fault(e)
            if fault is not None:
                self._trace(log)
                print(f"curate: error: {describe(fault)}", file=sys.stderr)
                return EXIT_FAILED
            print("curate: internal error (a bug in curate; please report it with this traceback):",
                  file=sys.stderr)
            traceback.print_exc(file=sys.stderr)
            return EXIT_BUG

    def _trace(self, log) -> None:
        """The traceback of the exception being handled: on stderr with -v (which the log then holds
        too), else in the log file only."""
        text = traceback.format_exc()
        if self.verbose:
            sys.stderr.write(text)
        elif log is not None:
            log.write(text)


def _task_fault(e: CurateError) -> str:
    """An executor's `task K failed: OSError(...)` (with Ray's remote traceback after it) as one sentence
    naming the path and what to do; any other message as it is."""
    text = str(e)
    fault = operator_fault(e) if type(e) is CurateError else None
    if fault is None or repr(fault) not in text:
        return text
    return text.split("\n", 1)[0].replace(repr(fault), describe(fault))
