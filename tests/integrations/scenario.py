"""The two-turn scenario the framework tests share: a memory saved through the tool, then recalled."""

from __future__ import annotations

INSTRUCTIONS = "You are a coding agent."
SAVE = ("memory_save", {"name": "deploy_steps", "content": "we deploy with buildkite", "description": "how we deploy",
                        "scope": "workstream"})  # the test's own workstream: no other test sees it or counts it
GET = ("memory_get", {"name": "deploy_steps", "scope": "workstream"})
DEPLOY_BLOCK = ('<memories>\n  <memory name="deploy_steps" type="general" scope="workstream" description="how we deploy">'
                'we deploy with buildkite</memory>\n</memories>')
HINT = "You have 1 memory in scope. Use memory_search() or memory_list() to find more."
