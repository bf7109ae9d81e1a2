"""The `docs` sub-parser and command: write docs/verdicts.md and docs/cli.md from the code (render/docs.py), or
with --check say which of them is stale. The help texts come from the very parsers `--help` prints."""

import argparse
import functools
import os
import subprocess
import sys

from ..base.errors import UsageError
from ..base.files import write_atomic
from ..render.docs import DocsError, cli_markdown, tool_block, verdicts_markdown

# The checkout's docs/ (scripts/cclbench_lib/cli/docs.py -> the repository root).
DEFAULT_DOCS_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))), "docs")
HELP_WIDTH = 100  # the help texts' width in docs/cli.md (argparse otherwise follows the terminal)
# The C++ programs and the file that defines each one's --help text.
TOOLS = (("coll_perf", "bench/core/config.cpp"), ("p2p_matrix", "bench/p2p/options.cpp"),
         ("topo_map", "bench/apps/topo_map.cpp"))
PAGES = ("verdicts.md", "cli.md")


def add_docs_parser(sub):
    docs = sub.add_parser("docs", help="write docs/verdicts.md and docs/cli.md from the code (the rules' codes and "
                          "meanings, the parsers, the C++ tools' --help)")
    docs.add_argument("--out", default=DEFAULT_DOCS_DIR, help="the folder to write (default: the checkout's docs/)")
    docs.add_argument("--bin-dir", help="where coll_perf, p2p_matrix, topo_map are built (default: the build's); "
                      "without them the C++ sections of the existing cli.md are kept")
    docs.add_argument("--check", action="store_true", help="write nothing; exit 1 naming each stale page")
    return docs


def _parsers(parser):
    """(title, parser) of cclbench and each subcommand, in the parser's order."""
    found = [("cclbench", parser)]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            found += [(f"cclbench {name}", sub) for name, sub in action.choices.items()]
    return found


def command_helps(parser):
    """[(title, help text)] at a fixed width (no help text names a path of this machine: the page is the same
    on every checkout)."""
    helps = []
    for title, each in _parsers(parser):
        each.formatter_class = functools.partial(argparse.HelpFormatter, width=HELP_WIDTH)
        helps.append((title, each.format_help()))
    return helps


def tool_help(bin_dir, name):
    """`NAME --help` of a built program, its own path replaced by its name; None when it is not built."""
    path = os.path.join(bin_dir, name)
    if not (os.path.isfile(path) and os.access(path, os.X_OK)):
        return None
    try:
        result = subprocess.run([path, "--help"], capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    if result.returncode != 0:
        return None
    return result.stdout.replace(path, name)


def pages(parser, bin_dir, committed_cli):
    """{page name: text}; a tool not built keeps its block of committed_cli (the existing cli.md, or "")."""
    tools = [(name, tool_help(bin_dir, name), where) for name, where in TOOLS]
    cli = cli_markdown(command_helps(parser), tools)
    for name, text, _where in tools:
        kept = tool_block(committed_cli, name) if text is None else None
        if kept:
            cli = cli.replace(tool_block(cli, name), kept)
    return {"verdicts.md": verdicts_markdown(), "cli.md": cli}


def cmd_docs(args, parser, default_bin_dir):
    out = os.path.abspath(args.out)
    cli_path = os.path.join(out, "cli.md")
    committed = ""
    if os.path.isfile(cli_path):
        with open(cli_path, encoding="utf-8") as handle:
            committed = handle.read()
    try:
        texts = pages(parser, os.path.abspath(args.bin_dir or default_bin_dir), committed)
    except DocsError as error:
        raise UsageError(str(error)) from None
    stale = []
    for name in PAGES:
        path = os.path.join(out, name)
        current = None
        if os.path.isfile(path):
            with open(path, encoding="utf-8") as handle:
                current = handle.read()
        if current == texts[name]:
            continue
        stale.append(path)
        if not args.check:
            os.makedirs(out, exist_ok=True)
            write_atomic(path, texts[name].encode("utf-8"))
    if args.check:
        for path in stale:
            print(f"cclbench: docs: {path} is stale: run cclbench docs", file=sys.stderr)
        return 1 if stale else 0
    print(f"cclbench: docs: wrote {len(stale)} of {len(PAGES)} page(s) in {out}", file=sys.stderr)
    return 0
