"""The WSGI entry point for external servers: ``gunicorn 'api.wsgi:application'``.

Built on import by design (a WSGI server imports this module to get the
app), from the same configuration the CLI reads. Like ``serve`` it creates
the schema only in an empty database and refuses an outdated one; in
production run ``memoryd db upgrade`` before starting the processes.
"""

from api.app import create_app
from memoryd.bootstrap import build_services
from memoryd.kernel.config import load_config
from memoryd.kernel.logs import configure_logging
from memoryd.storage import migrate

configure_logging()
_services = build_services(load_config())
migrate.ensure_ready(_services.database)
_services.search.warm_up()
if _services.vectors is not None and _services.redis is None:  # with workers, they embed
    _services.vectors.start()
application = create_app(_services)
