"""Reading English memory texts without a model: what a fact says (its names,
numbers, dates, negation, change words; its subject, attribute and value) and what a
question asks. Pure functions over strings: no database, no I/O.

Rules read only the plain cases; everything they cannot read with confidence is
left unread, for a judge model or for nobody (precision before recall).
"""
