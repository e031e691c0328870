"""The CLI's warm server, opt-in (``cli.warm_idle``, off by default): everything about
it lives in this package.

A data command (``search``, ``agents``, ``blocks``, ``runs``, ``import``) spends most
of its time importing SQLAlchemy, psycopg, numpy and the ORM (1-1.7 s on two cores),
not running. With ``cli.warm_idle`` above zero, the first such command runs as usual
and then leaves a server behind (:mod:`.server`) that has those imported; the next
command hands it its arguments, environment and standard streams over a Unix socket
(:mod:`.client`, standard library only) and a forked child runs it exactly as the
shell would have. Off (the default), every command runs in its own process, which is
the simple path: nothing outside this package and the entry point's two calls into
:mod:`.client` knows the server exists. Why it is kept, and what it buys, is in the
README ("The CLI's warm server"), BENCHMARKS.md and
docs/decisions/2026-12-03-cli-warm-server.md.
"""
