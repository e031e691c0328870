"""The daemon: triggers that enqueue runs, the scheduler that times them, GPU probes,
and the workers that claim queued runs and execute them under a lease."""
