"""The `curate` command line. Exit codes, `-v/--verbose`, `--quiet` and `--log` are the same for every
command (`curation.commands.console`); a subcommand added with `add_parser` gets them automatically."""
from __future__ import annotations

import argparse
import shlex
import sys
from contextlib import nullcontext
from pathlib import Path

from curation import __version__
from curation.commands.console import EXIT_CODES_HELP, Session, UsageError, add_common_options_everywhere
from curation.core.extras import require
from curation.errors import CurateError
from curation.ledger.pools import main_pool


def _cmd_validate(a) -> int:
    from curation.plan.graph import load_plan
    plan = load_plan(a.recipe)
    r = plan.recipe
    n = sum(len(v) for v in r.inputs.values())
    print(f"{a.recipe}: ok: {len(r.recipe.sources)} source(s), {n} input file(s), "
          f"fingerprint {r.fingerprint}, vocabulary {plan.vocab.id}")
    return 0


def _cmd_explain(a) -> int:
    from curation.plan.explain import explain
    from curation.plan.graph import load_plan
    print(explain(load_plan(a.recipe), nodes=a.nodes))
    return 0


def _cmd_run(a) -> int:
    from curation.commands.run import run
    if a.retries is not None and a.retries < 0:
        raise CurateError(f"--retries {a.retries}: give 0 or more (0: a lost task fails the run)")
    res = run(a.recipe, a.out, workers=a.workers, address=a.address, progress=not a.quiet, executor=a.executor,
              force=a.force, retries=a.retries, sign=a.sign)
    tok = sum(t["total_tokens"] for t in main_pool(res.rows).values())
    docs = sum(t["documents"] for t in main_pool(res.rows).values())
    print(f"{docs:,} documents, {tok:,} tokens in {res.out}/tokenized")
    for m in res.manifests:
        print(f"manifest: {m}")
    print(f"ledger:   {res.out}/ledger/ledger.duckdb")
    print(f"report:   {res.report}")
    return 0


def _local_manifest(manifest: str, quiet: bool) -> tuple[Path, bool]:
    """(a local manifest path, whether it was fetched): a manifest URL is read through a local cache."""
    from curation.core.outloc import is_remote
    if not is_remote(manifest):
        return Path(manifest), False
    from curation.mixture.fetch import fetch_manifest
    local = fetch_manifest(manifest)
    if not quiet:
        print(f"fetched {manifest} and what it names into {local.parent.parent}", file=sys.stderr)
    return local, True


def _cmd_verify(a) -> int:
    from curation.mixture.manifests import verify_manifest
    manifest, fetched = _local_manifest(a.manifest, a.quiet)
    if a.relocate and not fetched:   # a fetched copy is relocated to the cache already
        from curation.mixture.handoffs import relocate_handoff
        for path in relocate_handoff(manifest):
            print(f"rewrote {path}", file=sys.stderr)
    for line in verify_manifest(manifest, key=a.key):
        print(line if line.startswith("warning:") else f"ok  {line}")
    print(f"{a.manifest}: verified")
    return 0


def _print_table(cols, rows, file=None) -> None:
    from rich.console import Console
    from rich.table import Table
    t = Table(*cols)
    for r in rows:
        t.add_row(*[f"{v:,}" if isinstance(v, int) and not isinstance(v, bool) else str(v) for v in r])
    Console(width=200, file=file or sys.stdout).print(t)


LEDGER_DEFAULT = ("sources", "steps", "drops", "quarantine", "tokens", "mixture")   # printed without --table


def _cmd_ledger(a) -> int:
    from curation.core.atomic import atomic_write_bytes
    from curation.ledger import SCHEMAS
    from curation.ledger.export import encode, export_all, select
    from curation.ledger.store import VIEWS
    ldir = Path(a.out) / "ledger"
    if a.table and a.table not in SCHEMAS and a.table not in VIEWS:
        raise UsageError(f"unknown ledger table {a.table!r}; tables: {', '.join(SCHEMAS)}; views: {', '.join(VIEWS)}")
    if a.format == "table":
        names = [None] if a.sql else [a.table] if a.table else list(LEDGER_DEFAULT)
        with open(a.output, "w", encoding="utf-8") if a.output else nullcontext(sys.stdout) as f:
            for name in names:
                data = select(ldir, table=name, sql=a.sql)
                if name and not a.table:
                    print(name, file=f)
                _print_table(data.column_names, [tuple(r.values()) for r in data.to_pylist()], file=f)
        return 0
    if not a.table and not a.sql:
        if not a.output:
            raise UsageError(f"--format {a.format} without --table or --sql exports every table: give "
                             f"--output FOLDER (one {a.format} file per table)")
        for path in export_all(ldir, a.format, Path(a.output)):
            print(path)
        return 0
    data = encode(select(ldir, table=a.table, sql=a.sql), a.format)
    if a.output:
        atomic_write_bytes(Path(a.output), data)
        if not a.quiet:
            print(f"wrote {a.output}", file=sys.stderr)
    elif a.format == "parquet":
        if sys.stdout.isatty():
            raise UsageError("--format parquet is binary: give --output FILE or redirect stdout")
        sys.stdout.flush()
        sys.stdout.buffer.write(data)
    else:
        sys.stdout.write(data.decode())
    return 0


def _cmd_report(a) -> int:
    from curation.ledger import read_rows
    from curation.report import write_report
    out = Path(a.out)
    print(write_report(read_rows(out / "ledger"), out))
    return 0


def _cmd_train(a) -> int:
    require("train", "curate train")
    from curation.train.loop import TrainConfig, Trainer
    from curation.train.model import ModelConfig
    cfg = TrainConfig(max_steps=a.max_steps, batch_size=a.batch_size, seq_length=a.seq_length, lr=a.lr,
                      warmup_steps=a.warmup_steps if a.warmup_steps is not None else max(1, min(20, a.max_steps // 10)),
                      seed=a.seed,
                      checkpoint_every=a.checkpoint_every)
    manifest, fetched = _local_manifest(a.manifest, a.quiet)
    trainer = Trainer(manifest, a.out, cfg, ModelConfig.tiny(), key=a.key)
    resumed = f"; resuming at step {trainer.step}" if trainer.step else ""
    print(f"manifest {a.manifest}: verified; stage {trainer.manifest['stage']}, targets "
          f"{trainer.manifest['training']['targets']}; model {trainer.model.num_params():,} parameters{resumed}")
    trainer.train()
    print(f"checkpoint: {trainer.checkpoint_path}\nlog: {trainer.out / 'train.jsonl'}\n"
          f"consumed tokens written back to the ledger table `consumed` (training {trainer.training_id})")
    if fetched:
        from curation.mixture.fetch import publish_writeback
        print(publish_writeback(a.manifest, manifest))
    return 0


def _cmd_ablate(a) -> int:
    require("train", "curate ablate")
    from curation.commands.ablate import ablate
    from curation.core.outloc import is_remote, parse_out
    if is_remote(parse_out(a.out)):
        raise UsageError(f"--out {a.out}: curate ablate trains on its run's shards in place; give a local folder")
    summary = ablate(a.recipe, a.out, workers=a.workers, steps=a.steps, checkpoint_tokens=a.checkpoint_tokens,
                     choice_limit=a.choice_limit)
    from curation.report.ablation import caption, terminal_rows
    head, rows = terminal_rows(summary)
    _print_table(head, rows)
    print(caption(summary).replace("Best values in bold, second-best underlined.", "Best values *, second-best +."))
    print("average rank per checkpoint: " + "; ".join(
        f"{cp['tokens']:,} tokens " + ", ".join(f"{c} {v:.2f}" for c, v in sorted(cp["average_rank"].items()))
        for cp in summary["checkpoints"]))
    print(f"report: {Path(a.out) / 'ablation' / 'ablation.html'} (table: ablation.md, curve: rank_curve.png)")
    return 0


def _cmd_demo(a) -> int:
    from curation.commands.demo import materialise
    recipe = materialise(Path(a.dir))
    others = sorted(p.name for p in recipe.parent.glob("*.yaml") if p != recipe)
    print(f"wrote the multimodal demo recipe {recipe} with its data and vocabulary (also {', '.join(others)})\n"
          f"run it:  curate run {recipe} --out {Path(a.dir) / 'out'}\n"
          f"it has image and audio sources: pip install 'curate-llm[images,audio]' first; a text-only install "
          f"runs {recipe.parent / 'text.yaml'}")
    return 0


def _cmd_slurm(a) -> int:
    from curation.commands.slurm import SlurmJob, parse_port_range, submit, write_script
    from curation.core.outloc import is_remote, parse_out
    if is_remote(parse_out(a.out)):   # a URL would become a local folder named after its scheme
        raise UsageError(f"--out {a.out}: the job writes its script, log and Ray token under --out, which must be a "
                         f"shared folder; run `curate run --out {a.out}` from a job of your own")
    job = SlurmJob(recipe=Path(a.recipe).resolve(), out=Path(a.out).resolve(), nodes=a.nodes,
                   cpus_per_node=a.cpus_per_node, gpus_per_node=a.gpus_per_node, exclusive=a.exclusive,
                   partition=a.partition, time=a.time, job_name=a.job_name, port=a.port,
                   worker_ports=parse_port_range(a.worker_ports), join_timeout=a.join_timeout)
    job.check()   # a hostile or malformed value is refused (exit 2) before anything is looked up or written
    if not job.recipe.is_file():
        raise CurateError(f"recipe {a.recipe} not found")
    script = write_script(job, Path(a.script).resolve() if a.script else None)
    if a.dry_run:
        print(script.read_text(), end="")
        print(f"# wrote {script}; submit it with: sbatch {shlex.quote(str(script))}", file=sys.stderr)
        return 0
    print(f"{submit(script)} ({script})")
    return 0


def _cmd_tokenizer_train(a) -> int:
    from curation.commands.tokenizer import train_tokenizer
    path = train_tokenizer([Path(p) for p in a.inputs], Path(a.out), vocab_size=a.vocab_size, field=a.field)
    print(f"wrote {path}")
    return 0


def _cmd_classifier_train(a) -> int:
    from curation.commands.classifier import train
    print("\n".join(train(a.spec, a.out)))
    return 0


def _cmd_codec_check(a) -> int:
    from curation.commands.codec import check_codec, format_result
    print(format_result(check_codec(a.path, a.kind)))
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="curate", description="Data curation and mixture accounting for "
                                "multimodal LLM pretraining.", epilog=EXIT_CODES_HELP,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--version", action="version", version=f"curate {__version__}")
    sub = p.add_subparsers(dest="command", required=True)

    s = sub.add_parser("run", help="execute a recipe: shards, ledger, manifests, report")
    s.add_argument("recipe")
    s.add_argument("--out", default="out", help="output folder or s3://BUCKET/PREFIX (default: ./out); one run "
                   "at a time (lock file OUT/.curate-lock)")
    s.add_argument("--force", action="store_true", help="replace the outputs of another recipe in --out (what "
                   "this recipe does not produce is removed)")
    s.add_argument("--workers", type=int, default=None, help="parallel tasks (default: all CPUs)")
    s.add_argument("--address", default=None,
                   help="join a Ray cluster (else RAY_ADDRESS, else an embedded loopback-only Ray); its token "
                        "from RAY_AUTH_TOKEN, RAY_AUTH_TOKEN_PATH or ~/.ray/auth_token")
    s.add_argument("--retries", type=int, default=None, metavar="N",
                   help="run a task again up to N times when its Ray worker or node dies (default: the recipe's "
                        "task_retries, 3); a task that raises fails the run at once")
    s.add_argument("--executor", choices=["auto", "local", "ray"], default="auto",
                   help="where tasks run: `local` in this process, `ray` on Ray (default `auto`: Ray when "
                        "joining a cluster or for runs big enough to pay for its start-up, else local; the "
                        "choice is printed)")
    s.add_argument("--sign", metavar="KEY", default=None,
                   help="sign each manifest with this ed25519 private key (PEM; `openssl genpkey -algorithm "
                        "ed25519 -out KEY`): writes manifests/STAGE.sig, checked by `verify --key`")
    s.set_defaults(fn=_cmd_run)

    s = sub.add_parser("validate", help="check a recipe and its inputs; print its fingerprint")
    s.add_argument("recipe")
    s.set_defaults(fn=_cmd_validate)

    s = sub.add_parser("explain", help="print the phase table, step chains and each node's fingerprint")
    s.add_argument("recipe")
    s.add_argument("--nodes", action="store_true", help="one `key fingerprint resources` line per node, nothing else")
    s.set_defaults(fn=_cmd_explain)

    s = sub.add_parser("verify", help="check a manifest against its shards, plans, Megatron hand-off and ledger")
    s.add_argument("manifest", help="OUT/manifests/STAGE.json, or its s3:// URL (read through a local cache)")
    s.add_argument("--relocate", action="store_true",
                   help="first rewrite the paths the stage's hand-off files name, for an output folder that "
                        "was copied or moved (and store an older ledger's decisions in ledger.duckdb)")
    s.add_argument("--key", metavar="PUB", default=None,
                   help="also require the manifest's signature (manifests/STAGE.sig) by this ed25519 public key "
                        "(PEM); without it a manifest whose files and ledger were all rewritten consistently "
                        "cannot be told from the run's")
    s.set_defaults(fn=_cmd_verify)

    s = sub.add_parser("ledger", help="print or export ledger tables, or run SQL on ledger.duckdb",
                       description="Print ledger tables (default: " + ", ".join(LEDGER_DEFAULT) + ") or export "
                       "them. --format csv|json|parquet writes one table, view or query to --output FILE "
                       "(else stdout), or, with neither --table nor --sql, every table into --output FOLDER. "
                       "CSV writes list values as JSON text; JSON is an array of row objects.")
    s.add_argument("out", help="the output folder of a run")
    which = s.add_mutually_exclusive_group()
    which.add_argument("--table", help="one table or view")
    which.add_argument("--sql", help="a SQL query (DuckDB dialect, read-only)")
    s.add_argument("--format", choices=("table", "csv", "json", "parquet"), default="table",
                   help="`table` (default): boxes for reading; csv, json, parquet: for other tools")
    s.add_argument("--output", metavar="FILE", help="write there instead of stdout (a folder for all tables)")
    s.set_defaults(fn=_cmd_ledger)

    s = sub.add_parser("report", help="rewrite the report of an output folder from its ledger")
    s.add_argument("out")
    s.set_defaults(fn=_cmd_report)

    s = sub.add_parser("train", help="train the reference hybrid model from a manifest; write consumed tokens back")
    s.add_argument("manifest", help="a stage manifest written by `curate run` (OUT/manifests/STAGE.json, or its "
                                    "s3:// URL: read through a local cache, consumed tokens written back there)")
    s.add_argument("--out", required=True, help="folder for the checkpoint and train.jsonl (resumes if present)")
    s.add_argument("--max-steps", type=int, default=200)
    s.add_argument("--batch-size", type=int, default=8)
    s.add_argument("--seq-length", type=int, default=256)
    s.add_argument("--lr", type=float, default=3e-3)
    s.add_argument("--warmup-steps", type=int, default=None, help="default: 10%% of the steps, at most 20")
    s.add_argument("--checkpoint-every", type=int, default=50)
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--key", metavar="PUB", default=None,
                   help="train only on a manifest signed by this ed25519 public key (see `verify --key`)")
    s.set_defaults(fn=_cmd_train)

    s = sub.add_parser("ablate", help="train a proxy model on each candidate mixture of a recipe's `ablation:`; rank them")
    s.add_argument("recipe")
    s.add_argument("--out", default="out", help="output folder of the recipe's run (default: ./out)")
    s.add_argument("--workers", type=int, default=None)
    s.add_argument("--steps", type=int, default=None, help="training steps per candidate (default: the recipe's)")
    s.add_argument("--checkpoint-tokens", type=int, default=None, metavar="N",
                   help="measure every N training tokens, a whole number of steps (default: the recipe's "
                        "ablation.checkpoint_tokens); the last step is always measured")
    s.add_argument("--choice-limit", type=int, default=None, metavar="N",
                   help="score only the first N items of each choice set (a quick look; ablation.json records it)")
    s.set_defaults(fn=_cmd_ablate)

    codec = sub.add_parser("codec", help="image and audio codec tools").add_subparsers(dest="ccmd", required=True)
    s = codec.add_parser("check", help="load a codec checkpoint folder, check every tensor, encode a fixed probe")
    s.add_argument("path", help="a checkpoint folder (README, 'Codecs'), a weights file in one, or a seeded yaml")
    s.add_argument("--kind", choices=("image", "audio"), default=None, help="default: from the configuration")
    s.set_defaults(fn=_cmd_codec_check)

    s = sub.add_parser("slurm", help="write (and sbatch) a Slurm job that starts Ray on its nodes and runs a recipe")
    s.add_argument("recipe")
    s.add_argument("--nodes", type=int, required=True, help="nodes in the allocation (the first one is the Ray head)")
    s.add_argument("--cpus-per-node", type=int, required=True, help="CPUs Ray uses on each node")
    s.add_argument("--gpus-per-node", type=int, default=0,
                   help="GPUs per node: Slurm's --gpus-per-node and `ray start --num-gpus` on every node (default 0)")
    s.add_argument("--exclusive", action="store_true", help="whole nodes for the job (Slurm's --exclusive)")
    s.add_argument("--partition", default=None)
    s.add_argument("--time", default=None, help="Slurm time limit (HH:MM:SS or D-HH:MM)")
    s.add_argument("--out", default="out", help="output folder: must be on storage every node mounts at this path")
    s.add_argument("--job-name", default=None, help="default: curate-<recipe name>")
    s.add_argument("--port", type=int, default=6379,
                   help="the Ray head's GCS port (default 6379); Ray's other ports on every node are the 7 after it and "
                        "the worker ports: jobs sharing a node need --port values 1100 apart (README, 'Slurm')")
    s.add_argument("--worker-ports", default=None, metavar="LOW-HIGH",
                   help="ports of Ray's worker processes on every node (default: from port+100, 1000 of them or 4 "
                        "per CPU when that is more)")
    s.add_argument("--join-timeout", type=int, default=300, help="seconds to wait for all nodes to join")
    s.add_argument("--script", default=None, help="where to write the script (default: OUT/slurm/JOB.sbatch)")
    s.add_argument("--dry-run", action="store_true", help="write and print the script; do not submit it")
    s.set_defaults(fn=_cmd_slurm)

    s = sub.add_parser("demo", help="write the shipped recipes (the demo with its corpus) and vocabularies into DIR")
    s.add_argument("dir", nargs="?", default="curate-demo", help="target folder (default: ./curate-demo)")
    s.set_defaults(fn=_cmd_demo)

    tok = sub.add_parser("tokenizer", help="text tokenizer tools").add_subparsers(dest="tcmd", required=True)
    s = tok.add_parser("train", help="train a byte-level BPE tokenizer reproducibly on JSON-lines text")
    s.add_argument("inputs", nargs="+", help="jsonl(.gz) files or folders")
    s.add_argument("--out", required=True)
    s.add_argument("--vocab-size", type=int, default=16384)
    s.add_argument("--field", default="text")
    s.set_defaults(fn=_cmd_tokenizer_train)

    cls = sub.add_parser("classifier", help="text classifiers").add_subparsers(dest="ccmd", required=True)
    s = cls.add_parser("train", help="train a fastText quality or toxicity classifier from a spec, with its card")
    s.add_argument("spec", help="a classifier spec (YAML), e.g. recipes/classifiers/demo-quality.yaml")
    s.add_argument("--out", required=True, help="folder for NAME.ftz|.bin, NAME.card.json, NAME.train.txt")
    s.set_defaults(fn=_cmd_classifier_train)

    add_common_options_everywhere(p)   # last: every subcommand above, whoever added it
    return p


def main(argv: list[str] | None = None) -> int:
    """Run `curate ARGV`; returns the exit code (`curation.commands.console` lists them). A usage error
    exits through argparse (SystemExit 2)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    args = build_parser().parse_args(argv)
    return Session(args.verbose, args.quiet, args.log).run(args.fn, args, argv)


if __name__ == "__main__":
    sys.exit(main())
