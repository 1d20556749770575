"""Alembic environment for errkb.

errkb runs migrations programmatically (``errkb.store``), passing an open SQLAlchemy connection
in ``config.attributes["connection"]``. Running ``alembic`` by hand against a database URL works
too (``alembic -x db=sqlite:///path upgrade head`` from the source tree).
"""

from __future__ import annotations

from alembic import context
from sqlalchemy import create_engine

from errkb.store.models import Base

config = context.config
target_metadata = Base.metadata


def run_migrations_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        context.configure(
            connection=connection, target_metadata=target_metadata, render_as_batch=True
        )
        with context.begin_transaction():
            context.run_migrations()
        return
    url = context.get_x_argument(as_dictionary=True).get("db") or config.get_main_option(
        "sqlalchemy.url"
    )
    engine = create_engine(str(url))
    with engine.connect() as conn:
        context.configure(connection=conn, target_metadata=target_metadata, render_as_batch=True)
        with context.begin_transaction():
            context.run_migrations()


if context.is_offline_mode():
    raise SystemExit("errkb migrations run online only")
run_migrations_online()
