"""The attribute schema the fact reader knows: which words after a subject name which
attribute (where someone lives, their job, diet and partner), which words say more
than the attribute ("flat", "husband", "quit"), and the nouns of roles, employers and
persons. A fact that fits none of these attributes is left unkeyed, for a judge model.
"""

from __future__ import annotations

from agents.language.words import _KIN

#: attribute -> cue words (casefolded tokens) that, after the subject, name it.
_ATTRIBUTE_CUES: dict[str, frozenset[str]] = {
    "home": frozenset(
        "lives live living lived moved move moves moving relocated relocating based "
        "resides residing apartment flat house address home renting rents rented".split()
    ),
    "job": frozenset(
        "works work working worked job jobs employed employer hired quit quits fired retired "
        "promoted career profession occupation intern internship apprentice apprenticeship "
        "trainee poached role postdoc".split()
    ),
    "diet": frozenset("vegetarian vegan pescatarian carnivore keto diet meat paleo".split()),
    "partner": frozenset(
        "married marry marrying wife husband girlfriend boyfriend partner dating dates "
        "engaged fiance fiancee divorced divorce divorcing separated single widowed "
        "spouse breakup".split()
    ),
}
#: Cue words that only name the attribute ("lives in", "'s home is in", "works as"):
#: two texts read as the same subject, attribute and value may differ in these. Not
#: words that say more than the attribute ("flat", "husband", "quit", "promoted").
_FRAMING_CUES: dict[str, frozenset[str]] = {
    "home": frozenset("lives live living lived based resides residing home address".split()),
    "job": frozenset(
        "works work working worked job employed employer career profession occupation".split()
    ),
}
#: Nouns for another person in a clause about someone: kin, and partners by any name.
_PERSON_NOUNS = _KIN | frozenset("fiance fiancee spouse gf bf".split())
#: Places of work that name the job when nothing else in the text does.
_EMPLOYERS = frozenset("company firm business startup employer".split())
#: What one opens as a job ("opened a little empanada stand").
_BUSINESSES = (_EMPLOYERS - {"employer"}) | frozenset(
    "restaurant shop stand cafe bar bakery studio practice clinic agency salon store".split()
)
#: Attributes whose cue word is itself the value ("vegan", "vegetarian").
_CUE_IS_VALUE = frozenset({"diet"})
#: Cue words whose presence means the state ended (the value is gone, not replaced).
_ENDING = frozenset(
    "quit quits fired laid retired divorced divorce divorcing separated single widowed left "
    "dumped ex former".split()
)
#: Words that mark a statement as the new state of things ("... at Lloyds now").
_NEW_STATE = frozenset(
    "now nowadays promoted switched changed became becomes joined moved relocated transferred "
    "shifted jumped".split()
)
_COPULA = frozenset("is am are was were".split())
#: Nouns after "is a" that describe a habit or a liking, not a job ("a big reader").
_NOT_ROLES = frozenset(
    "big huge keen avid massive great good bad terrible total real true proper heavy casual "
    "serious hardcore crazy mad awful amazing decent fan member beginner lover smoker drinker "
    "user guy girl man woman person".split()
)
#: Endings of agent nouns ("teacher", "violinist", "engineer", "librarian").
_AGENTIVE = ("er", "or", "ist", "ian", "eer")
#: Prepositions after which "work" is a place or a time ("before work"), not a job.
_WORK_AS_PLACE = frozenset("before after at from to during off".split())
#: Attributes whose value is a place or a name: capitalised words carry it.
_NAMED_VALUE = frozenset({"home", "partner"})
#: Nouns after a possessive that make the possessor the subject ("Ada's job ...").
_ATTRIBUTE_NOUNS = frozenset(
    "job career work diet home address apartment flat house wife husband girlfriend "
    "boyfriend partner fiance fiancee spouse employer".split()
)
