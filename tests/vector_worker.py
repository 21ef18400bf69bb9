"""``python -m tests.vector_worker worker``: ``memoryd worker`` with the semantic channel on the fake embedder (the
configuration names real models only), so tests run the workers' embedding path in a process of its own."""

from __future__ import annotations

from memoryd.bootstrap import build_services
from memoryd.kernel.config import load_config
from memoryd.kernel.logs import configure_logging
from memoryd.storage import migrate
from tests.fake_embedder import FakeEmbedder
from workers.runner import run_worker


def main() -> None:
    configure_logging()
    services = build_services(load_config(None), FakeEmbedder())
    migrate.ensure_ready(services.database)
    run_worker(services)


if __name__ == "__main__":
    main()
