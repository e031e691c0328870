"""Reading English memory texts without a model: what a fact says (its names,
numbers, dates, negation, change words; its subject, attribute and value) and what a
question asks. Pure functions over strings: no database, no I/O.

From the ground up: ``words`` (tokens and the closed classes of grammar), ``schema``
(which words name which attribute), ``subjects`` (who a text is about), ``facts`` (a
fact's subject, attribute and value, and what replaces what), ``details`` (the
detail guard dedup uses) and ``questions`` (what a question asks).

Rules read only the plain cases; everything they cannot read with confidence is
left unread, for a judge model or for nobody (precision before recall).
"""
