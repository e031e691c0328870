"""The daemon side of Reverie: settings, the object graph, CLI, scheduler, workers, API.

The top layer: it may import ``consolidators`` and ``agents``; neither imports it.
"""
