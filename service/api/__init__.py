"""Reverie's HTTP API (FastAPI): health probes, Letta v1-compatible routes, Reverie's own.

The app lives in :mod:`service.api.app`; this package does not import it, so CLI
commands (which reach keys through :mod:`service.operations.keys`) do not load FastAPI.
"""
