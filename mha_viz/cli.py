"""The command line, `mha-viz` (an installed package) or `python -m mha_viz`:

    mha-viz [app] [--port 8501] [--public] [--dtype auto] [--lesson FILE] [--processes N]   start the web app
                                                                                  (`mha_viz.launch`)
    mha-viz corpus --model minilm --input sample --engine local --out stats/
        [--batch-size 16] [--max-tokens 128] [--no-importance] [--text-column text] [--dtype auto]

`corpus` runs head statistics over a corpus and saves them.
A progress bar (documents, documents/s, ETA) goes to stderr; the folder it saved and a short
table of the top heads by a few corpus metrics go to stdout. A bad corpus or model is one line on
stderr and exit code 2, never a traceback.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from mha_viz import launch
from mha_viz_models import BUNDLED, PRECISIONS


def _app_options(parser: argparse.ArgumentParser, default) -> None:
    parser.add_argument("--port", type=int, default=default, help=f"the port to serve on ({launch.DEFAULT_PORT})")
    parser.add_argument("--public", action="store_true", default=default,
                        help="public mode (MHA_VIZ_PUBLIC=1: only the listed models, a capped token limit), "
                             "served on every interface for a reverse proxy")
    parser.add_argument("--dtype", choices=PRECISIONS, default=default,
                        help="the sidebar's default Precision (MHA_VIZ_DTYPE): auto is the checkpoint's own")
    parser.add_argument("--lesson", default=default, metavar="FILE_OR_NAME",
                        help="a lesson every session opens on (MHA_VIZ_LESSON): a lesson file, or a bundled "
                             "lesson's name (attention-head-by-head); with --public, a workshop")
    parser.add_argument("--processes", type=int, default=default, metavar="N",
                        help="serve from N app processes behind nginx on --port, each browser kept on one (a "
                             "lecture hall: docs/deploying.md); needs nginx; 1, the default, runs the app alone")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="mha-viz", description="See what every attention head of a transformer does. With no command, "
                                    "or `app`, start the web app.")
    _app_options(parser, None)
    sub = parser.add_subparsers(dest="command")
    app = sub.add_parser("app", help="start the web app (the default)", description="Start the web app.")
    _app_options(app, argparse.SUPPRESS)  # the top level's options, after `app` too
    run = sub.add_parser("corpus", help="head statistics over a corpus, saved to a folder",
                         description="Every head's statistics averaged over the documents of a corpus.")
    run.add_argument("--model", required=True, help=f"registry name ({', '.join(BUNDLED)}), hub id or folder")
    run.add_argument("--input", required=True,
                     help='"sample" (the bundled corpus), a .txt / .jsonl / .csv file or a Hugging Face dataset id')
    run.add_argument("--engine", default="local", help="local (this process) or ray (actors on a Ray cluster)")
    run.add_argument("--out", required=True, help="folder to save the statistics in (created if needed)")
    run.add_argument("--batch-size", type=int, default=16)
    run.add_argument("--max-tokens", type=int, default=128, help="each document is cut to this many tokens")
    run.add_argument("--no-importance", dest="importance", action="store_false",
                     help="skip head importance (the slowest part)")
    run.add_argument("--text-column", default=None, help="the text column of a .jsonl / .csv file or dataset")
    run.add_argument("--first", type=_count, default=None, metavar="N",
                     help="use the corpus's first N documents only (default: all of them)")
    run.add_argument("--examples", action="store_true",
                     help="also keep each head's top documents, decile samples and histograms (saved with the "
                          "statistics; the app's Head examples page reads them)")
    run.add_argument("--dtype", choices=PRECISIONS, default="auto",
                     help="what the model computes in (auto: the checkpoint's own; the bundled models float32)")
    return parser


def _count(text: str) -> int:
    """A positive whole number (`--first`)."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive whole number")
    return value


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code (2: bad input, with a one-line message)."""
    args = _parser().parse_args(argv)
    if args.command in (None, "app"):
        if args.processes is not None and args.processes != 1:  # a lecture hall: app processes behind nginx
            from mha_viz.launch_group import run_app_group
            return run_app_group(args.processes, args.port or launch.DEFAULT_PORT, bool(args.public),
                                 args.dtype or "auto", lesson=args.lesson or "")
        return launch.run_app(args.port or launch.DEFAULT_PORT, bool(args.public), args.dtype or "auto",
                              lesson=args.lesson or "")
    # heavy (PyTorch, transformers): imported only for the corpus command, so that starting the app does not
    from mha_viz.corpus import command
    return command.run(args)
