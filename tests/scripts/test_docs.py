"""The generated reference pages and the front page: docs/verdicts.md names every verdict and screen code and no other,
docs/cli.md is what the parsers and the built C++ tools print for --help, and the README is a front page whose
set-up commands are the ones CI runs."""

import importlib
import os
import re
import subprocess
import sys
import tempfile
import unittest

from helpers import SOURCE_DIR as REPO

SCRIPTS = os.path.join(REPO, "scripts")

sys.path.insert(0, SCRIPTS)

from cclbench_lib.cli import docs as cli_docs  # noqa: E402
from cclbench_lib.cli.main import DEFAULT_BIN_DIR, build_parser  # noqa: E402
from cclbench_lib.render import docs as render_docs  # noqa: E402
from cclbench_lib.render.verdict import verdict_lines  # noqa: E402
from cclbench_lib.rules import screen_rules, verdict  # noqa: E402

DOCS = os.path.join(REPO, "docs")
BINARY_DIR = os.environ.get("CCLBENCH_BINARY_DIR", os.path.join(REPO, "build"))
TOOL_DIR = os.path.join(BINARY_DIR, "bench", "apps")


def read(path):
    with open(path, encoding="utf-8") as handle:
        return handle.read()


class VerdictsPage(unittest.TestCase):
    def setUp(self):
        self.page = read(os.path.join(DOCS, "verdicts.md"))

    def anchors(self):
        return re.findall(r'<a id="([^"]+)"></a>', self.page)

    def test_every_code_has_one_entry_and_every_entry_a_code(self):
        # The committed page read as text, against the code's lists.
        expected = list(verdict.CODES) + ["screen." + code for code in screen_rules.REASON_CODES]
        self.assertEqual(sorted(self.anchors()), sorted(expected))
        self.assertEqual(len(self.anchors()), len(set(self.anchors())))

    def test_committed_page_is_not_stale(self):
        self.assertEqual(self.page, render_docs.verdicts_markdown(),
                         "docs/verdicts.md is stale: run scripts/cclbench docs")

    def test_a_code_without_meaning_or_a_meaning_without_code_is_refused(self):
        saved = dict(verdict.CODES)
        try:
            verdict.CODES["rail.new_kind"] = (verdict.FAIL, "rails", "report.md")
            with self.assertRaisesRegex(render_docs.DocsError, "no meaning for rail.new_kind"):
                render_docs.verdicts_markdown()
        finally:
            verdict.CODES.clear()
            verdict.CODES.update(saved)
        saved_meanings = dict(screen_rules.REASON_MEANINGS)
        try:
            screen_rules.REASON_MEANINGS["node.gone"] = (screen_rules.BAD, "x", "y", ())
            with self.assertRaisesRegex(render_docs.DocsError, "a meaning names no code: node.gone"):
                render_docs.verdicts_markdown()
        finally:
            screen_rules.REASON_MEANINGS.clear()
            screen_rules.REASON_MEANINGS.update(saved_meanings)

    def test_constants_exist_and_the_page_prints_their_values(self):
        names = [name for _m, _c, constants in verdict.CODE_MEANINGS.values() for name in constants]
        names += [name for _s, _m, _c, constants in screen_rules.REASON_MEANINGS.values() for name in constants]
        self.assertTrue(names)
        for name in set(names):
            module, attribute = name.split(".")
            value = getattr(importlib.import_module(f"cclbench_lib.rules.{module}"), attribute)
            self.assertIn(f"`{name}` = `{value!r}`", self.page)
        with self.assertRaisesRegex(render_docs.DocsError, "rails.NO_SUCH_RATIO does not exist"):
            render_docs.constant_value("rails.NO_SUCH_RATIO")

    def test_the_report_points_each_reason_at_its_entry(self):
        # A run with wrong data on one host: the report's first lines send the reader to the code's entry.
        finding = {"code": "wrong_data", "where": "intra.node5", "case_id": "all_reduce.float.sum.out.8K", "wrong": 3}
        judged = verdict.build_verdict("R", ["node5"], [{"point": "intra.node5", "hosts": ["node5"]}], [finding], {})
        reasons = [line for line in verdict_lines(judged) if line.startswith("- fail: ")]
        self.assertEqual(len(reasons), 1, reasons)
        self.assertTrue(reasons[0].endswith("Explained: docs/verdicts.md#data.wrong"), reasons[0])
        self.assertIn('<a id="data.wrong"></a>', self.page)

    def test_severities_on_the_page_are_the_rules(self):
        for code, (severity, check, _look) in verdict.CODES.items():
            self.assertIn(f"| [`{code}`](#{code}) | {severity} | {check} |", self.page)


class CliPage(unittest.TestCase):
    def setUp(self):
        self.page = read(os.path.join(DOCS, "cli.md"))
        made_with = re.search(r"argparse of Python (\d+\.\d+)", self.page)
        running = "%d.%d" % sys.version_info[:2]
        cpp_only = self._testMethodName == "test_cpp_part_matches_the_built_tools"
        if made_with and made_with.group(1) != running and not cpp_only:
            self.skipTest(f"docs/cli.md was generated with argparse of Python {made_with.group(1)}, this is "
                          f"{running}: argparse lays help out differently across versions")

    def test_python_part_is_not_stale(self):
        # Tools looked up in an empty folder: their committed blocks are kept, the rest is regenerated.
        with tempfile.TemporaryDirectory() as empty:
            texts = cli_docs.pages(build_parser(), empty, self.page)
        self.assertEqual(self.page, texts["cli.md"], "docs/cli.md is stale: run scripts/cclbench docs")

    def test_cpp_part_matches_the_built_tools(self):
        if not os.access(os.path.join(TOOL_DIR, "coll_perf"), os.X_OK):
            self.skipTest(f"the C++ tools are not built in {TOOL_DIR}: their --help is not compared")
        texts = cli_docs.pages(build_parser(), TOOL_DIR, "")
        for name, _where in cli_docs.TOOLS:
            self.assertEqual(render_docs.tool_block(self.page, name), render_docs.tool_block(texts["cli.md"], name),
                             f"docs/cli.md's {name} --help is stale: run scripts/cclbench docs")

    def test_help_printed_by_the_command_is_the_page(self):
        # What a user sees with --help at a 100-column terminal (argparse: COLUMNS - 2).
        env = dict(os.environ, COLUMNS=str(cli_docs.HELP_WIDTH + 2))
        for command in ("baseline", "screen", "compare"):
            printed = subprocess.run([sys.executable, os.path.join(SCRIPTS, "cclbench"), command, "--help"],
                                     capture_output=True, text=True, env=env, check=True).stdout
            self.assertNotIn(DEFAULT_BIN_DIR, printed)  # the page is the same on every machine
            self.assertIn("```text\n" + printed.rstrip("\n") + "\n```", self.page, command)

    def test_every_subcommand_has_a_section(self):
        parser = build_parser()
        names = [name for action in parser._actions if hasattr(action, "choices") and isinstance(action.choices, dict)
                 for name in action.choices]
        self.assertIn("baseline", names)
        for name in names:
            self.assertIn(f"### `cclbench {name}`", self.page)

    def test_check_flag_names_a_stale_page(self):
        with tempfile.TemporaryDirectory() as out:
            for name in cli_docs.PAGES:
                with open(os.path.join(out, name), "w", encoding="utf-8") as handle:
                    handle.write(read(os.path.join(DOCS, name)))
            with open(os.path.join(out, "verdicts.md"), "a", encoding="utf-8") as handle:
                handle.write("a hand edit\n")
            result = subprocess.run([sys.executable, os.path.join(SCRIPTS, "cclbench"), "docs", "--check", "--out",
                                     out, "--bin-dir", out], capture_output=True, text=True)
            self.assertEqual(result.returncode, 1, result.stderr)
            self.assertIn("verdicts.md is stale", result.stderr)
            self.assertNotIn("cli.md is stale", result.stderr)


class FrontPage(unittest.TestCase):
    def setUp(self):
        self.lines = read(os.path.join(REPO, "README.md")).splitlines()

    def test_short_and_opens_with_the_two_commands(self):
        self.assertLessEqual(len(self.lines), 250)
        opening = "\n".join(self.lines[:30])
        self.assertIn("bash scripts/setup.sh && scripts/cclbench baseline", opening)
        self.assertIn("bash scripts/run_tests.sh", opening)

    def test_the_test_command_is_what_ci_runs(self):
        """.ci/run runs the README's test command as it is, as a command of its own (its `stage` wrapper times it)."""
        commands = [line.strip() for line in read(os.path.join(REPO, ".ci", "run")).splitlines()
                    if line.strip() and not line.strip().startswith("#")]
        self.assertIn("bash scripts/run_tests.sh", "\n".join(self.lines), "the README's test command")
        self.assertTrue(any(re.fullmatch(r"(stage \w+ )?bash scripts/run_tests\.sh( \|\| status=1)?", line)
                            for line in commands), commands)

    def test_links_between_pages_resolve(self):
        """Every relative link of the README and docs/ names a file that exists, and its #anchor a heading or an
        <a id> of that file (GitHub's heading anchors: lower case, punctuation dropped, spaces as '-')."""
        def anchors(path):
            text = read(path)
            found = set(re.findall(r'<a id="([^"]+)"></a>', text))
            for heading in re.findall(r"^#+ (.+)$", text, re.M):
                found.add(re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-"))
            return found
        pages = [os.path.join(REPO, "README.md")] + [os.path.join(DOCS, name) for name in sorted(os.listdir(DOCS))
                                                     if name.endswith(".md")]  # docs/data: measured outputs
        for page in pages:
            for target in re.findall(r"\]\(([^)\s]+)\)", read(page)):
                if target.startswith(("http://", "https://")):
                    continue
                path, _, anchor = target.partition("#")
                path = os.path.normpath(os.path.join(os.path.dirname(page), path)) if path else page
                self.assertTrue(os.path.exists(path), f"{os.path.basename(page)}: {target}")
                if anchor and path.endswith(".md"):
                    self.assertIn(anchor, anchors(path), f"{os.path.basename(page)}: {target}")

    def test_links_to_docs_exist(self):
        text = "\n".join(self.lines)
        for target in re.findall(r"\]\(((?:docs|results_schema|tests|scripts)/[^)#\s]+)", text):
            self.assertTrue(os.path.exists(os.path.join(REPO, target)), target)
        for page in ("bring-up.md", "verdicts.md", "cli.md", "results.md", "testing.md"):
            self.assertTrue(f"docs/{page}" in text, f"the README names no docs/{page}")
            self.assertTrue(os.path.isfile(os.path.join(DOCS, page)), page)


if __name__ == "__main__":
    unittest.main()
