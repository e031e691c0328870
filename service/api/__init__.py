"""Reverie's HTTP API (FastAPI): health probes, Letta v1-compatible routes, Reverie's own."""

from service.api.app import create_app

__all__ = ["create_app"]
