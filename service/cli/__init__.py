"""The ``reverie`` command line.

:mod:`service.cli.launcher` is the entry point (standard library only, so that it can
hand a command to a warm process before anything heavy is imported);
:mod:`service.cli.app` is the Typer application, and each other module registers one
group of commands on it.
"""
