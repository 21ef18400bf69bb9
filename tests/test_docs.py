"""Every example in docs/ runs, and prints what the page says it prints.

Shell blocks run page by page, pasted into bash after the README's walk-through (whose variables the pages
use), against a live server. Python blocks run here or in tests/sdk/test_readme_examples.py (the SDKs'),
TOML blocks load as configuration, JSON blocks parse.
"""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path
from typing import Any

import pytest

from commands.model import SaveMemory
from events.types import EventMetadata
from memoryd.bootstrap import analyzer_for
from memoryd.kernel.config import Config, load_config
from memoryd.kernel.domain import Namespace
from tests.conftest import REDIS_URL
from tests.doc_examples import DOCS, ROOT, code_blocks, error_messages, readme_walkthrough, run_pasted
from tests.helpers import LiveServer, make_services

PAGES = sorted(DOCS.glob("*.md"))
INSTALLS = re.compile(r"^(\.venv/bin/pip install |\(cd sdk/typescript && npm ci )")
SHELL_PAGES = sorted(page.name for page in PAGES
                     if any(not INSTALLS.match(block) for block in code_blocks(page.read_text(), "sh")))
STANDING_IN = {  # the examples' hosts, and what stands in for them here
    "postgresql+psycopg://memoryd@db.internal:5432/memoryd": "$MEMORYD_DATABASE_URL",
    "redis://cache.internal:6379/0": REDIS_URL,
}
PRINTED = {  # what each page's shell prints, as the page says
    "agents-and-turns.md": ["Saved memory 'release_steps' (scope=project)", '"turn_id":"t-7"', '"type":"tool_error"',
                            '"block_matches":true'],
    "auditing.md": ["the log verifies", "structured_memories: equal", '"free":true',
                    '"content":"Alice is on call this week."'],
    "http-api.md": ["page: standup_time", "page: release_process", "after must be a previous page's next_after", '"version":2',
                    "the memory is not at version 1", '"status":"ok","name":"release_process"',
                    '"name":"release_notes_draft","deleted":false',
                    '"action":"memory.delete"', '"complete":true', '"description":"how we release, edited"'],
    "identities.md": ['"reason":"token revoked"', '"action":"token.revoke"', "laptop stolen"],
    "operations.md": ["log head", '"event_type":'],
    "sdks-mcp-hooks.md": [],  # the hook fails open after 1.5 s: whether it prints depends on the machine's load
}
PYTHON_RUNNERS = {"from projections.search import Analyzer": "test_docs", "build_services": "test_docs",
                  "memoryd_sdk": "tests/sdk/test_readme_examples.py",
                  "memoryd_sdk.integrations": "tests/integrations/test_frameworks_docs.py"}


def blocks(page: str, language: str) -> list[str]:
    return code_blocks((DOCS / page).read_text(), language)


def compact(output: str) -> str:
    """JSON as compact as Flask prints it, whatever a command printed."""
    return re.sub(r'(["\]}\d]|true|false|null)([:,]) (?=["\[{\dtfn-])', r"\1\2", output)


def promised(example: str) -> list[str]:
    """What each ``print`` is said to print: its trailing comment, or the comment line after it."""
    lines = []
    for line in example.splitlines():
        if line.startswith("print(") and "  # " in line:
            lines.append(line.split("  # ", 1)[1])
        elif line.startswith("# "):
            lines.append(line[2:])
    return lines


@pytest.fixture(scope="module")
def walked(live_server: LiveServer, tmp_path_factory: pytest.TempPathFactory) -> str:
    """The shell the README's walk-through leaves behind: its functions and variables, to paste before a page."""
    done = run_pasted(readme_walkthrough() + "\ndeclare -f field\ndeclare -p $(compgen -v | grep -E '^[A-Z_]+$' "
                      "| grep -vE '^(BASH.*|PATH|PWD|OLDPWD|SHLVL|HOME|UID|EUID|PPID|IFS|_)$')\n",
                      tmp_path_factory.mktemp("walked"), live_server.base_url, live_server.database_url)
    assert done.returncode == 0, done.stdout + done.stderr
    variables = [line for line in done.stdout.splitlines() if line.startswith("declare -- ")]
    field = done.stdout[done.stdout.index("field () "):].split("\n}\n", 1)[0] + "\n}"
    return "source .venv/bin/activate\n" + field + "\n" + "\n".join(variables) + "\n"


@pytest.mark.parametrize("page", SHELL_PAGES)
def test_a_pages_shell_runs_after_the_readmes_walkthrough(live_server: LiveServer, walked: str, tmp_path: Path,
                                                          page: Any) -> None:
    script = "\n".join(block for block in blocks(page, "sh") if not INSTALLS.match(block))
    done = run_pasted(walked + script, tmp_path, live_server.base_url, live_server.database_url, STANDING_IN)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Error" not in done.stderr, done.stderr
    text = compact((DOCS / page).read_text())
    assert [message for message in error_messages(done.stdout) if message not in text] == []  # none unforeseen
    assert [printed for printed in PRINTED[page] if printed not in compact(done.stdout + done.stderr)] == []


def test_every_page_with_shell_says_what_it_prints() -> None:
    assert set(SHELL_PAGES) == set(PRINTED)


def test_every_python_example_has_a_test_that_runs_it() -> None:
    for page in PAGES:
        for example in code_blocks(page.read_text(), "python"):
            assert any(needle in example for needle in PYTHON_RUNNERS), f"{page.name}: {example[:80]}"


def test_the_install_commands_name_what_exists() -> None:
    installs = [block for page in PAGES for block in code_blocks(page.read_text(), "sh") if INSTALLS.match(block)]
    assert installs, "the SDK page shows how to install"
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    package = json.loads((ROOT / "sdk" / "typescript" / "package.json").read_text())
    for block in installs:
        for extra in re.findall(r"'\.\[(\w+)\]'", block):
            assert extra in extras
        assert "./sdk/python" not in block or (ROOT / "sdk" / "python" / "pyproject.toml").exists()
        assert "npm run build" not in block or "build" in package["scripts"]
        assert "npm ci" not in block or (ROOT / "sdk" / "typescript" / "package-lock.json").exists()


def test_every_json_example_parses() -> None:
    for page in PAGES:
        for example in code_blocks(page.read_text(), "json"):
            json.loads(example)


def test_the_configuration_page_shows_every_default(tmp_path: Path) -> None:
    [example] = blocks("configuration.md", "toml")
    (tmp_path / "config.toml").write_text(example)
    config = load_config(tmp_path / "config.toml", environ={})
    defaults = Config()
    shown = tomllib.loads(example)
    assert set(shown) == {"memory", "server", "storage", "search", "workers", "auth"}
    for section in shown:
        if section != "storage":  # the example's path, not the per-user default
            assert getattr(config, section) == getattr(defaults, section), section
    written = set(re.findall(r"^(?:# )?(\w+) = ", example, re.M))
    assert [f"{section}.{key}" for section in shown for key in vars(getattr(defaults, section))
            if key not in written] == []  # every key shown


def test_the_analyzer_examples_print_what_the_search_page_says(capsys: pytest.CaptureFixture[str]) -> None:
    [example] = blocks("search.md", "python")
    exec(example, {})  # noqa: S102 - our own docs
    assert capsys.readouterr().out.splitlines() == promised(example)


def test_the_search_pages_configuration_is_valid(tmp_path: Path) -> None:
    [example] = blocks("search.md", "toml")
    (tmp_path / "config.toml").write_text(example)
    config = load_config(tmp_path / "config.toml", environ={})
    assert (config.search.language, config.search.k1, config.search.b) == ("german", 1.2, 0.5)
    assert analyzer_for(config).language == "german"


def test_the_recall_pages_configurations_are_valid(tmp_path: Path) -> None:
    local, endpoint = blocks("recall.md", "toml")
    for example in (local, endpoint):
        (tmp_path / "config.toml").write_text(example)
        search = load_config(tmp_path / "config.toml", environ={}).search
        assert search.semantic == tomllib.loads(example)["search"]["semantic"]
    assert (search.embeddings_url, search.embeddings_model, search.embeddings_dimension) == (
        "http://127.0.0.1:11434/v1", "nomic-embed-text", 768)


def test_the_identities_pages_configuration_is_valid(tmp_path: Path) -> None:
    [example] = blocks("identities.md", "toml")
    (tmp_path / "config.toml").write_text(example)
    config = load_config(tmp_path / "config.toml", environ={})
    assert (config.auth.default_token_days, config.auth.session_idle_days) == (0, 30)


def test_the_in_process_example_runs(sqlite_url: str, monkeypatch: pytest.MonkeyPatch,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    [example] = [block for block in blocks("agents-and-turns.md", "python") if "build_services" in block]
    services = make_services(sqlite_url)
    user_id = services.directory.create_user("agent")
    workstream_id = services.directory.create_workstream(user_id, "ws")
    services.bus.handle(SaveMemory("deploy_steps", "we deploy with buildkite", "how we deploy", None,
                                   Namespace("global", "")), EventMetadata())
    monkeypatch.setenv("MEMORYD_DATABASE_URL", sqlite_url)
    exec(example, {"workstream_id": workstream_id, "user_id": user_id})  # noqa: S102 - our own docs
    printed = capsys.readouterr().out
    assert "[general:global] deploy_steps - how we deploy" in printed  # the tool's search
    assert '<memories>\n  <memory name="deploy_steps" type="general" scope="global"' in printed  # the turn's block
    assert "You are a coding agent.\n\n<memories>" in printed and "You have 1 memory in scope." in printed


def test_every_page_is_on_the_readmes_map() -> None:
    readme = (ROOT / "README.md").read_text()
    covered = {page.name for page in PAGES if f"(docs/{page.name})" in readme
               or page.name.startswith("frameworks")}  # framework pages gather in docs/frameworks.md
    assert [page.name for page in PAGES if page.name not in covered] == []
    assert [link for link in re.findall(r"\]\((docs/[^)#]+)", readme) if not (ROOT / link).exists()
            and link != "docs/frameworks.md"] == []


def test_links_between_pages_lead_somewhere() -> None:
    for page in PAGES:
        for link in re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", page.read_text()):
            assert (DOCS / link).exists() or link == "frameworks.md", f"{page.name} links to {link}"


def test_anchors_across_pages_name_a_heading() -> None:
    headings = {path.name: {anchor(line) for line in path.read_text().splitlines() if line.startswith("#")}
                for path in [*PAGES, ROOT / "README.md"]}
    for page in PAGES:
        for target, fragment in re.findall(r"\]\(((?:\.\./)?[A-Za-z-]*\.md)?#([^)]+)\)", page.read_text()):
            name = target.removeprefix("../") or page.name
            assert fragment in headings.get(name, {fragment}), f"{page.name}: {target}#{fragment}"


def anchor(heading: str) -> str:
    """GitHub's anchor for a heading: lowercase, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.lstrip("#").strip().lower()).replace(" ", "-")


def test_every_benchmark_has_its_command_its_date_and_a_table() -> None:
    page = (DOCS / "benchmarks.md").read_text()
    for section in page.split("\n## ")[1:]:
        title = section.splitlines()[0]
        commands = code_blocks(section, "")
        assert commands and re.search(r"\b2026-\d\d-\d\d\b", section) and "\n|---" in section, title
        for script in re.findall(r"\b((?:bench|tests)/[\w/]+\.py)", "".join(commands)):
            assert (ROOT / script).exists(), f"{title}: {script}"
