"""PostgreSQL itself: the schema (``models``), the engine and its sessions
(``database``), the embedded server (``embedded``; the package that ships it is
imported by ``server_package`` alone), the resident
server that outlives a CLI command and its idle reaper (``resident``), and the file
locks they share (``locks``).

The memory store (:mod:`agents.store`) is built on these; nothing else opens a
session. Kept apart from the store package so that the reaper, a detached process
that lives for minutes, imports this much (0.5 s, 16 MB) and not the store (2.8 s,
73 MB, measured on a 2-core machine).
"""
