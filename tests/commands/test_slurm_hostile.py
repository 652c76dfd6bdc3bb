"""`curate slurm` with hostile names: the recipe's file name, `--out`, `--partition` and `--job-name` holding
newlines, `$()`, backticks, quotes, semicolons, `#`, `%` and spaces. Control characters are refused (exit 2,
nothing written); everything else is quoted, and the generated script is RUN in a sandbox whose
`sbatch`, `srun`, `scontrol`, `ray`, `hostname`, `python` and `curate` only log their argv: no injected
command runs (no PWNED file anywhere) and every stand-in receives the hostile strings as single intact
arguments. `#SBATCH` lines are read back with sbatch's own rules (`_get_argument` in Slurm's sbatch)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from curation.commands.cli import main
from curation.commands.console import UsageError
from curation.commands.slurm import SlurmJob, render
from tests.conftest import TEXT_DEMO

JOB_ID = "4242"
HOSTILE = [
    "a b",
    "$(touch PWNED)",
    "`touch PWNED`",
    "x'; touch PWNED; echo '",
    'x"; touch PWNED; echo "',
    "x; touch PWNED # c",
    "50% %x %j %%",
    "x\\y $HOME ${PATH} !! * ?",
    "a b $(touch PWNED) `touch PWNED` '\"; touch PWNED; # % *",
]
CONTROLS = {"\n": "U+000A (newline)", "\r": "U+000D (carriage return)", "\x1b": "U+001B (control)",
            "\x7f": "U+007F (control)", "\x85": "U+0085 (control)", "\u2028": "U+2028 (line separator)"}

LOGGER = """#!{python}
import json, os, sys
with open(os.environ["STANDIN_LOG"], "a") as f:
    f.write(json.dumps([os.path.basename(sys.argv[0]), *sys.argv[1:]]) + "\\n")
{tail}
"""
PRINTS = {"hostname": 'print("127.0.0.1")', "scontrol": 'print("node-a\\nnode-b")',
          "sbatch": 'print("Submitted batch job 4242")'}
# The join check (`python - NODES GPUS TIMEOUT`) waits, as the real one does, until every node's `ray start`
# has run: here, until the head's and each srun's stand-in has logged (else the EXIT trap can kill a
# backgrounded stand-in before it writes, on a loaded machine).
JOIN_CHECK = """
if sys.argv[1:2] == ["-"]:
    import time
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        with open(os.environ["STANDIN_LOG"]) as f:
            started = sum(line.startswith(('["ray"', '["srun"')) for line in f)   # a line being written: no match
        if started >= int(sys.argv[2]):
            break
        time.sleep(0.05)
"""


def _stand_ins(folder: Path) -> Path:
    folder.mkdir()
    for name in ("sbatch", "srun", "scontrol", "ray", "hostname", "python", "curate"):
        tail = JOIN_CHECK if name == "python" else PRINTS.get(name, "")
        (folder / name).write_text(LOGGER.format(python=sys.executable, tail=tail))
        (folder / name).chmod(0o755)
    return folder


def _calls(log: Path) -> list[list[str]]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def sbatch_arguments(line: str) -> list[str]:
    """The arguments sbatch reads from one `#SBATCH` line: whitespace splits unless quoted, ' and " group,
    a backslash takes the next character literally, an unquoted # starts a comment."""
    args, cur, quote, escape, started = [], "", None, False, False
    for ch in line.removeprefix("#SBATCH"):
        if ch.isspace() and quote is None:
            if started:
                args.append(cur)
            cur, started, escape = "", False, False
        elif escape:
            cur, escape = cur + ch, False
        elif ch == "\\":
            escape = started = True
        elif quote is not None:
            quote, cur = (None, cur) if ch == quote else (quote, cur + ch)
        elif ch in "'\"":
            quote, started = ch, True
        elif ch == "#":
            break
        else:
            cur, started = cur + ch, True
    return args + ([cur] if started else [])


def _sbatch_options(script: str) -> dict[str, str]:
    opts = {}
    for line in script.splitlines()[1:]:
        if not line.startswith("#SBATCH"):
            break
        [arg] = sbatch_arguments(line)   # one option per line, never split or cut
        key, _, value = arg.partition("=")
        opts[key] = value
    return opts


def _run_sandboxed(script: Path, tmp_path: Path, bin_dir: Path) -> subprocess.CompletedProcess:
    cwd = tmp_path / "cwd"
    cwd.mkdir(exist_ok=True)
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "HOME": str(tmp_path / "home"), "SLURM_JOB_ID": JOB_ID,
           "SLURM_JOB_NODELIST": "node-[a-b]", "SLURM_JOB_NUM_NODES": "2", "SLURM_CPUS_PER_TASK": "4",
           "STANDIN_LOG": str(tmp_path / "calls.jsonl")}
    return subprocess.run(["bash", str(script)], cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


def _pwned_files(tmp_path: Path) -> list[Path]:
    """Files an injected `touch PWNED` would have made (in the sandbox's folders or under /tmp/ray-JOB)."""
    roots = [tmp_path, Path(f"/tmp/ray-{JOB_ID}")]
    return [p for r in roots if r.exists() for p in r.rglob("PWNED")]


@pytest.mark.parametrize("hostile", HOSTILE)
def test_hostile_names_are_quoted_and_nothing_runs(tmp_path, hostile):
    bin_dir = _stand_ins(tmp_path / "bin")
    recipes = tmp_path / f"recipes {hostile}"
    recipes.mkdir()
    recipe = recipes / f"{hostile}.yaml"
    recipe.write_text(TEXT_DEMO.read_text())
    out = tmp_path / f"out {hostile}"
    if "\\" in hostile:   # a backslash in --out would stop Slurm's %x/%j in the log name: refused, below
        out = tmp_path / f"out {hostile.replace(chr(92), '')}"
    job = SlurmJob(recipe=recipe, out=out, nodes=2, cpus_per_node=4, gpus_per_node=1, bin_dir=bin_dir)
    text = render(job)
    script = tmp_path / "job.sbatch"
    script.write_text(text)
    assert subprocess.run(["bash", "-n", str(script)], capture_output=True).returncode == 0

    opts = _sbatch_options(text)                   # what sbatch itself will read
    assert opts["--output"] == str(out / "slurm").replace("%", "%%") + "/%x-%j.log"
    name = opts["--job-name"]
    assert name.startswith("curate-") and all(c.isalnum() or c in "._+-" for c in name)
    comment = [line for line in text.splitlines() if line.startswith("# Written by")]
    assert len(comment) == 1 and "\n" not in comment[0]

    p = _run_sandboxed(script, tmp_path, bin_dir)
    assert p.returncode == 0, p.stderr
    assert _pwned_files(tmp_path) == []
    calls = _calls(tmp_path / "calls.jsonl")
    curate = [c for c in calls if c[0] == "curate"]
    assert curate == [["curate", "run", str(recipe), "--out", str(out), "--address", "127.0.0.1:6379"]]
    head, worker = [c for c in calls if c[0] == "ray"], [c for c in calls if c[0] == "srun"]
    assert len(head) == 1 and f"--temp-dir=/tmp/ray-{JOB_ID}" in head[0] and "--num-gpus=1" in head[0]
    assert len(worker) == 1 and worker[0][worker[0].index("-w") + 1] == "node-b"
    assert f"--temp-dir=/tmp/ray-{JOB_ID}" in worker[0] and "--num-gpus=1" in worker[0]
    assert ["python", "-", "2", "1", "300"] in calls   # the join check, its heredoc intact
    assert (out / "slurm").is_dir() and not (out / "slurm" / f"job-{JOB_ID}").exists()   # the token went


@pytest.mark.parametrize("hostile", HOSTILE)
def test_cli_writes_the_script_under_out_with_a_safe_name_and_sbatch_gets_one_argument(tmp_path, hostile,
                                                                                       monkeypatch, capsys):
    bin_dir = _stand_ins(tmp_path / "bin")
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    monkeypatch.setenv("STANDIN_LOG", str(tmp_path / "calls.jsonl"))
    recipe = tmp_path / f"{hostile}.yaml"
    recipe.write_text(TEXT_DEMO.read_text())
    out = tmp_path / "out"
    assert main(["slurm", str(recipe), "--nodes", "2", "--cpus-per-node", "1", "--out", str(out)]) == 0
    [script] = (out / "slurm").glob("*.sbatch")
    assert script.parent == out / "slurm" and script.name.startswith("curate-")
    assert all(c.isalnum() or c in "._+-" for c in script.name)
    assert _calls(tmp_path / "calls.jsonl") == [["sbatch", str(script)]]
    assert "Submitted batch job 4242" in capsys.readouterr().out
    assert _pwned_files(tmp_path) == []


@pytest.mark.parametrize("char", sorted(CONTROLS))
@pytest.mark.parametrize("where", ["recipe", "--out", "--partition", "--job-name"])
def test_control_characters_are_refused_with_exit_2(tmp_path, capsys, char, where):
    recipe = tmp_path / (f"a{char}touch PWNED{char}.yaml" if where == "recipe" else "r.yaml")
    recipe.write_text(TEXT_DEMO.read_text())
    out = tmp_path / (f"o{char}touch PWNED{char}" if where == "--out" else "out")
    args = ["slurm", str(recipe), "--nodes", "2", "--cpus-per-node", "1", "--out", str(out), "--dry-run"]
    if where.startswith("--") and where != "--out":
        args += [where, f"x{char}touch PWNED"]
    assert main(args) == 2
    err = capsys.readouterr().err
    what = "the recipe path" if where == "recipe" else where
    assert f"{what} " in err and f"contains the control character {CONTROLS[char]}" in err
    assert "cannot be written safely into a Slurm script" in err
    assert not any(tmp_path.rglob("*.sbatch")) and not (out / "slurm").exists()   # nothing written


def test_nul_and_other_refusals_through_the_api(tmp_path):
    ok = dict(recipe=tmp_path / "r.yaml", out=tmp_path / "out", nodes=1, cpus_per_node=1)
    for kw, says in [({"out": tmp_path / "a\0b"}, "--out"), ({"job_name": "a\0b"}, "--job-name"),
                     ({"time": "30\n"}, "--time"), ({"bin_dir": tmp_path / "b\nin"}, "bin folder"),
                     ({"out": tmp_path / "a\\b"}, "contains a backslash"), ({"bin_dir": tmp_path / "a:b"}, "splits PATH"),
                     ({"out": Path("relative")}, "must be an absolute path")]:
        with pytest.raises(UsageError, match=says):
            render(SlurmJob(**{**ok, **kw}))


@pytest.mark.parametrize("where", ["--partition", "--job-name"])
@pytest.mark.parametrize("hostile", HOSTILE)
def test_hostile_partition_and_job_name_are_refused(tmp_path, capsys, where, hostile):
    args = ["slurm", str(TEXT_DEMO), "--nodes", "1", "--cpus-per-node", "1", "--out", str(tmp_path / "o"),
            "--dry-run", where, hostile]
    assert main(args) == 2
    assert f"{where} {hostile!r}: use " in capsys.readouterr().err
    assert not (tmp_path / "o").exists()
