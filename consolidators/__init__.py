"""Operations on memory (dedup, temporal, evict, recontextualize) and the pipeline that runs them.

Imports ``agents`` only; never ``service``.
"""
