"""The memory counts are kept by triggers on ``structured_memories``: a row that appears counts one more
in its namespace and type, one that goes counts one less (a count that reaches 0 goes), one that moves
to another type moves its count. The projection no longer reads a row's old key and writes the counts
itself, two statements on every save; a replay (a rebuild, ``memoryd projections verify``) runs the
same triggers, so rebuilt counts still equal live ones.

The counts are recomputed from the rows, so a database at 0011 keeps its totals exactly.

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-01
"""

from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None

_KEY = "scope = {row}.scope AND scope_id = {row}.scope_id AND type = {row}.type"
_ADD = ("INSERT INTO memory_counts (scope, scope_id, type, count) VALUES (NEW.scope, NEW.scope_id, NEW.type, 1) "
        "ON CONFLICT (scope, scope_id, type) DO UPDATE SET count = memory_counts.count + 1;")
_TAKE = (f"UPDATE memory_counts SET count = count - 1 WHERE {_KEY.format(row='OLD')}; "
         f"DELETE FROM memory_counts WHERE {_KEY.format(row='OLD')} AND count <= 0;")
_MOVED = " OR ".join(f"OLD.{column} IS DISTINCT FROM NEW.{column}" for column in ("scope", "scope_id", "type"))

_SQLITE = [
    f"CREATE TRIGGER memory_counts_add AFTER INSERT ON structured_memories BEGIN {_ADD} END",
    f"CREATE TRIGGER memory_counts_take AFTER DELETE ON structured_memories BEGIN {_TAKE} END",
    f"CREATE TRIGGER memory_counts_move AFTER UPDATE OF scope, scope_id, type ON structured_memories "
    f"WHEN {_MOVED.replace('IS DISTINCT FROM', 'IS NOT')} BEGIN {_TAKE} {_ADD} END",
]
_POSTGRES = [
    f"""CREATE FUNCTION memory_counts_follow() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF TG_OP IN ('UPDATE', 'DELETE') THEN {_TAKE} END IF;
        IF TG_OP IN ('UPDATE', 'INSERT') THEN {_ADD} END IF;
        RETURN NULL;
    END $$""",
    "CREATE TRIGGER memory_counts_add_take AFTER INSERT OR DELETE ON structured_memories "
    "FOR EACH ROW EXECUTE FUNCTION memory_counts_follow()",
    "CREATE TRIGGER memory_counts_move AFTER UPDATE OF scope, scope_id, type ON structured_memories "
    f"FOR EACH ROW WHEN ({_MOVED}) EXECUTE FUNCTION memory_counts_follow()",
]


def upgrade() -> None:
    for statement in _POSTGRES if op.get_bind().dialect.name == "postgresql" else _SQLITE:
        op.execute(statement)
    op.execute("DELETE FROM memory_counts")
    op.execute("INSERT INTO memory_counts (scope, scope_id, type, count) "
               "SELECT scope, scope_id, type, count(*) FROM structured_memories GROUP BY scope, scope_id, type")


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP TRIGGER memory_counts_move ON structured_memories")
        op.execute("DROP TRIGGER memory_counts_add_take ON structured_memories")
        op.execute("DROP FUNCTION memory_counts_follow()")
    else:
        for name in ("memory_counts_move", "memory_counts_take", "memory_counts_add"):
            op.execute(f"DROP TRIGGER {name}")
