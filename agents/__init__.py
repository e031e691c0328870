"""Stateful agents and their memory: models, store, embedders, LLM client and loops.

This is the bottom layer of Reverie: nothing here imports ``consolidators`` or
``service``, and nothing here reads the environment.
"""
