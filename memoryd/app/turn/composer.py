"""The turn composer: what an agent runtime puts in front of the model this turn.

One call per user turn, the spec's relevance injection end to end:

1. resolve the session live (acting user, project access, the persona's lever);
2. extract the context from the last three user texts (``conversation``);
3. rank the envelope against it with the search index (exact BM25
   statistics over what this session can see), or with no context take the
   most recently updated; the index ranks every memory exactly, so the top
   ``relevance_k`` of ``fetch_limit`` candidates are simply its top
   ``min(relevance_k, fetch_limit)``, which is what it is asked for;
4. keep those scoring above the floor, render them from the log at the
   versions the index ranked (``block``), within the budget;
5. add the hint ("You have N memories in scope", N the true count) and the
   nudges the newest user message earns, cooldown permitting.

A recorded turn counts once: it takes the session's next turn number, charges
the nudges' cooldowns, counts the injected memories' reads and leaves a
receipt, all in one transaction. A retry of its ``turn_id`` replays it from
the receipt and changes nothing. HTTP, embedding, the SDKs, the MCP server's
``memory_context`` and the prompt hook all come through here.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from sqlalchemy.exc import IntegrityError, SQLAlchemyError

import memoryd.app.turn.block as block
import memoryd.app.turn.nudges as nudges
import memoryd.app.turn.records as records
from events.store import EventStore
from events.streams import memory_versions
from memoryd.app.scope import SessionScope, WorkstreamGone, resolve
from memoryd.app.turn.answers import Item, Turn, TurnReceipt, sha256
from memoryd.app.turn.conversation import conversation_length
from memoryd.app.turn.request import Signal, TurnRequest
from memoryd.app.turn.tools import ToolNames
from memoryd.kernel.config import MemorySettings
from memoryd.kernel.domain import Memory, utc_timestamp
from memoryd.kernel.errors import Conflict, ValidationError
from memoryd.storage.db import Database
from memoryd.storage.directory import Directory
from memoryd.storage.sessions import Session
from projections.queries import record_access
from projections.search import Candidate, SearchIndex, SearchService

log = logging.getLogger(__name__)
PURGE_EVERY_SECONDS = 3_600.0
Clock = Callable[[], float]  # seconds since the epoch


class TurnComposer:
    def __init__(self, store: EventStore, database: Database, directory: Directory, search: SearchService,
                 settings: MemorySettings, clock: Clock = time.time) -> None:
        self.store, self.database, self.directory, self.search = store, database, directory, search
        self.settings, self.clock = settings, clock
        self._purged_at = float("-inf")
        self._purging = threading.Lock()

    def compose(self, session: Session, request: TurnRequest) -> Turn:
        """This turn's block, hint and nudges; recorded unless ``request.preview``."""
        self._check(request)
        draft, kinds = self._draft(session, request)  # a retried turn_id is found, and replayed, by _record
        if request.preview:
            if not kinds:
                return draft
            with self.database.read() as conn:
                delivered = records.deliveries(conn, session.session_id)
            due = [kind for kind in kinds if self._cooled(delivered.get(kind))]
            return replace(draft, nudges=[nudges.nudge(kind, request.tool_names) for kind in due])
        return self._record(session, request, draft, kinds)

    def signal(self, session: Session, signal: Signal) -> list[nudges.Nudge]:
        """The nudges a tool-loop event earns (``resume``, or ``tool_results`` with a denial or an error)."""
        try:
            scope = resolve(session, self.directory, self.store)
        except WorkstreamGone:
            return []
        if not self.settings.nudges or not scope.memory_enabled:
            return []
        try:
            in_scope = self.search.candidates(scope.envelope_filter(), "", 0).in_scope
        except Exception:  # as in a turn: no count, so only the nudges that need none
            log.exception("could not count the memories in scope of session %s", session.session_id)
            in_scope = 0
        kinds = (nudges.for_resume(in_scope) if signal.event == "resume"
                 else nudges.for_tool_results(signal.denied, signal.failed, in_scope))
        if not kinds:
            return []
        now_ms = self._now_ms()
        with self.database.write() as conn:
            won = [kind for kind in kinds if records.charge(conn, session.session_id, kind, now_ms, self._cooldown_ms)]
        return [nudges.nudge(kind, signal.tool_names) for kind in won]

    def receipt(self, session: Session, turn_id: str) -> TurnReceipt | None:
        """The session's own record of a turn, its block rebuilt from the log and checked against the recorded
        hash. Memories the session can no longer see (a revoked member, an archived project) stay out: then
        the block is withheld and ``withheld`` counts them, as access is resolved at each call."""
        with self.database.read() as conn:
            stored = records.find(conn, session.session_id, turn_id)
        if stored is None:
            return None
        try:
            visible = resolve(session, self.directory, self.store).envelope_filter().scopes or ()
        except WorkstreamGone:
            visible = ()
        return self._receipt_view(stored, lambda memory: any(
            pattern.scope == memory.scope and pattern.scope_id in (None, memory.scope_id) for pattern in visible))

    def receipts(self, session_id: str, after_turn: int, limit: int) -> list[TurnReceipt]:
        with self.database.read() as conn:
            stored = records.page(conn, session_id, after_turn, limit)
        return [self._receipt_view(receipt) for receipt in stored]

    def receipts_showing(self, memory_id: str, limit: int) -> list[TurnReceipt]:
        """The newest turns, in any session, that put this memory in front of the model."""
        with self.database.read() as conn:
            stored = records.showing(conn, memory_id, limit)
        return [self._receipt_view(receipt) for receipt in stored]

    # -- composing -----------------------------------------------------------------

    def _check(self, request: TurnRequest) -> None:
        if request.relevance_k is not None and request.relevance_k > self.settings.relevance_k:
            raise ValidationError(f"relevance_k must be between 1 and {self.settings.relevance_k} "
                                  "(the configured memory.relevance_k)")
        if request.min_position and request.min_position > (head := self.store.head_position()):
            raise ValidationError(f"min_position {request.min_position} is beyond the head of the log ({head}); "
                                  "use a position a write answered in X-Memory-Position")

    def _draft(self, session: Session, request: TurnRequest) -> tuple[Turn, list[str]]:
        """The turn as composed now (nothing recorded), and the nudge types it may deliver."""
        empty = Turn(request.turn_id or None, None, 0, True, request.placement, request.system, "", "", [], 0, 0, [],
                     tools=request.tool_names)
        k = request.relevance_k or self.settings.relevance_k
        with self.database.snapshot():  # the log's tail for the index and the session's workstream: one transaction
            try:  # first: the index's lock is waited for before the snapshot holds a connection
                caught_up: SearchIndex | Exception = self.search.catch_up()
            except Exception as error:
                caught_up = error
            scope = None if isinstance(caught_up, Exception) else self._scope(session)
        if scope is None:  # the failed catch-up may have ended the snapshot's transaction (PostgreSQL): a read of its own
            scope = self._scope(session)
        if isinstance(scope, WorkstreamGone):
            return replace(empty, memory_enabled=False, degraded=str(scope)), []
        if not scope.memory_enabled:
            return replace(empty, memory_enabled=False), []
        if isinstance(caught_up, Exception):  # retrieval must never fail the turn: the runtime still gets its messages
            return self._degraded(empty, session, caught_up), []
        try:  # the index ranks the whole envelope exactly: the top k of fetch_limit candidates are its top k
            found, bm25_alone = self.search.ranked(caught_up, scope.envelope_filter(), request.context,
                                                   min(k, self.settings.fetch_limit))
        except Exception as error:
            return self._degraded(empty, session, error), []
        try:  # after the snapshot, which the shared index may have passed: the versions it ranked are all there
            chosen, below_floor = _chosen(found.ranked, k, request.min_score)
            versions = self.search.versions([candidate.position for candidate in chosen])
        except Exception as error:
            return self._degraded(empty, session, error), []
        degraded = bm25_alone
        if request.min_position > found.position:
            fault = self.search.fault
            degraded = (f"the search index has reached position {found.position}, not {request.min_position}"
                        + (f": {fault.describe()}" if fault is not None else ""))
        shown = [(candidate, versions[candidate.position]) for candidate in chosen if candidate.position in versions]
        rendered = block.render([memory for _, memory in shown], request.max_chars)
        items = [_item(candidate, memory) for candidate, memory in shown[:rendered.kept]]
        hint = block.hint(found.in_scope, request.tool_names) if request.tool_visible and found.in_scope > 0 else ""
        kinds = []
        if self.settings.nudges:
            kind = nudges.for_user_message(request.newest_user_text, self._conversation_length(session, request),
                                           found.in_scope)
            kinds = [kind] if kind is not None else []
        visible_block, visible_hint = (rendered.text, hint) if request.placement != "none" else ("", "")
        draft = replace(empty, position=found.position, block=visible_block, hint=visible_hint, items=items,
                        in_scope=found.in_scope, candidates=len(found.ranked), degraded=degraded,
                        dropped={"floor": below_floor, "budget": len(shown) - rendered.kept})
        return draft, kinds

    def _scope(self, session: Session) -> SessionScope | WorkstreamGone:
        try:
            return resolve(session, self.directory, self.store)
        except WorkstreamGone as gone:
            return gone

    @staticmethod
    def _degraded(empty: Turn, session: Session, error: Exception) -> Turn:
        log.exception("memory retrieval failed for session %s", session.session_id, exc_info=error)
        return replace(empty, degraded=f"memory retrieval failed ({type(error).__name__})")

    def _conversation_length(self, session: Session, request: TurnRequest) -> int:
        """Messages so far; with ``query`` only, the session's first turn counts as its first message."""
        if request.query is None:
            return conversation_length(request.messages)
        with self.database.read() as conn:
            return 1 if records.turns_so_far(conn, session.session_id) == 0 else 2

    # -- recording -----------------------------------------------------------------

    def _record(self, session: Session, request: TurnRequest, draft: Turn, kinds: list[str]) -> Turn:
        turn_id = request.turn_id or f"turn_{uuid.uuid4().hex}"
        now, now_ms = utc_timestamp(dt.datetime.fromtimestamp(self.clock(), dt.UTC)), self._now_ms()
        try:
            with self.database.write() as conn:
                number = records.next_turn(conn, session.session_id)  # holds the session: its turns queue here
                if (stored := records.find(conn, session.session_id, turn_id)) is not None:
                    raise _AlreadyRecorded(stored)
                won = [kind for kind in kinds if records.charge(conn, session.session_id, kind, now_ms,
                                                                self._cooldown_ms)]
                turn = replace(draft, turn_id=turn_id, turn=number, receipt_id=str(uuid.uuid4()),
                               nudges=[nudges.nudge(kind, request.tool_names) for kind in won])
                records.record(conn, _receipt(session, request, turn, now))
                if turn.items:
                    record_access(conn, [item.memory_id for item in turn.items], now)
        except _AlreadyRecorded as already:
            return self._replay(already.receipt, request)
        except IntegrityError:  # the same turn_id recorded by a racing request that got in first
            with self.database.read() as conn:
                stored = records.find(conn, session.session_id, turn_id)
            if stored is None:
                raise
            return self._replay(stored, request)
        except SQLAlchemyError:
            log.exception("could not record turn %s of session %s", turn_id, session.session_id)
            return replace(draft, turn_id=turn_id, nudges=[],
                           degraded="; ".join(filter(None, [draft.degraded, "the turn could not be recorded"])))
        self._purge_now_and_then()
        return turn

    def _replay(self, stored: records.Receipt, request: TurnRequest) -> Turn:
        if stored.request_sha256 != request.fingerprint():
            raise Conflict(f"turn_id {stored.turn_id!r} was already used for another request")
        details = stored.details
        rebuilt, rendered = self._rebuilt(details)
        items = [item for item, _ in rendered]
        return Turn(stored.turn_id, stored.turn, stored.position, details["memory_enabled"], details["placement"],
                    request.system, rebuilt, details["hint"], items, details["in_scope"], details["candidates"],
                    [nudges.nudge(kind, request.tool_names) for kind in details["nudges"]], stored.receipt_id,
                    details["degraded"], details["dropped"], replayed=True, tools=request.tool_names)

    def _rebuilt(self, details: dict[str, Any]) -> tuple[str, list[tuple[Item, Memory]]]:
        """The block a receipt's items render to, read from the log at the recorded versions (not the
        rendering cache: a receipt is checked against the log itself)."""
        positions = [item["position"] for item in details["items"]]
        versions = memory_versions(self.store, positions)
        shown = [(item, versions[item["position"]]) for item in details["items"] if item["position"] in versions]
        items = [(Item(memory.memory_id, memory.name, memory.type, memory.scope, item["score"], item["position"]),
                  memory) for item, memory in shown]
        text = block.render([memory for _, memory in shown]).text if details["placement"] != "none" else ""
        return text, items

    def _receipt_view(self, stored: records.Receipt,
                      sees: Callable[[Memory], bool] = lambda memory: True) -> TurnReceipt:
        rebuilt, rendered = self._rebuilt(stored.details)
        details = stored.details
        items = [item for item, memory in rendered if sees(memory)]
        withheld = len(rendered) - len(items)
        tools = ToolNames.parse(details.get("tool_names"))
        return TurnReceipt(
            stored.receipt_id, stored.session_id, stored.turn_id, stored.turn, stored.created, stored.position,
            details["placement"], details["memory_enabled"], details["tool_visible"], details["in_scope"],
            details["candidates"], items, [nudges.nudge(kind, tools) for kind in details["nudges"]],
            details["degraded"], details["dropped"], "" if withheld else rebuilt, withheld, details["hint"],
            stored.block_sha256, sha256(rebuilt) == stored.block_sha256, stored.system_sha256)

    def _purge_now_and_then(self) -> None:
        """Forget receipts past the retention (and deliveries long out of their cooldown), at most hourly."""
        days = self.settings.receipt_retention_days
        if not days or self.clock() - self._purged_at < PURGE_EVERY_SECONDS or not self._purging.acquire(False):
            return
        try:
            self._purged_at = now = self.clock()
            cutoff = utc_timestamp(dt.datetime.fromtimestamp(now, dt.UTC) - dt.timedelta(days=days))
            delivered_before = int((now - max(days * 86_400, self.settings.nudge_cooldown)) * 1000)
            with self.database.write() as conn:
                records.purge(conn, cutoff, delivered_before)
        except SQLAlchemyError:
            log.exception("could not purge expired turn receipts")
        finally:
            self._purging.release()

    @property
    def _cooldown_ms(self) -> int:
        return self.settings.nudge_cooldown * 1000

    def _now_ms(self) -> int:
        return int(self.clock() * 1000)

    def _cooled(self, delivered_ms: int | None) -> bool:
        return delivered_ms is None or delivered_ms <= self._now_ms() - self._cooldown_ms


class _AlreadyRecorded(Exception):
    def __init__(self, receipt: records.Receipt) -> None:
        super().__init__(receipt.turn_id)
        self.receipt = receipt


def _chosen(ranked: Sequence[Candidate], k: int, floor: float) -> tuple[list[Candidate], int]:
    """The top ``k``: by score above the floor, or (no context) by recency; and how many the floor removed."""
    top = list(ranked[:k])
    if top and top[0].score is None:
        return top, 0
    kept = [candidate for candidate in top if candidate.score is not None and candidate.score > 0
            and candidate.score >= floor]
    return kept, len(top) - len(kept)


def _item(candidate: Candidate, memory: Memory) -> Item:
    return Item(memory.memory_id, memory.name, memory.type, memory.scope, candidate.score, candidate.position)


def _receipt(session: Session, request: TurnRequest, turn: Turn, now: str) -> records.Receipt:
    details = {"placement": turn.placement, "memory_enabled": turn.memory_enabled,
               "tool_visible": request.tool_visible, "in_scope": turn.in_scope, "candidates": turn.candidates,
               "items": [{"memory_id": item.memory_id, "position": item.position, "score": item.score}
                         for item in turn.items],
               "nudges": [nudge.type for nudge in turn.nudges], "hint": turn.hint, "degraded": turn.degraded,
               "dropped": turn.dropped, "tool_names": request.tool_names.to_dict()}
    return records.Receipt(turn.receipt_id or "", session.session_id, turn.turn_id or "", turn.turn or 0, now,
                           turn.position, request.fingerprint(), turn.block_sha256,
                           turn.system_sha256, details)

