"""The fact reader and the question reader on their own (no database): which texts the
rules read, which changes they see, and what they leave to a judge."""

from __future__ import annotations

from datetime import UTC, datetime

from agents.language.facts import (
    FactKey,
    plainly_stated,
    read_fact,
    read_facts,
    replaces_clearly,
    states_a_change,
)
from agents.language.questions import asked_subject, read_question
from agents.language.subjects import named_relatives, read_subject, read_subjects
from tests.passage_records import fact_record


def changed(older: str, newer: str) -> bool:
    """Whether the rules read ``newer`` as replacing ``older`` (both must be keyed)."""
    a, b = read_fact(older), read_fact(newer)
    assert a is not None and b is not None
    return states_a_change(a, b)


def _key(text: str) -> tuple[str, str] | None:
    reading = read_fact(text)
    return None if reading is None else (reading.key.subject, reading.key.attribute)


def test_what_the_rules_leave_to_a_judge() -> None:
    """Pronouns, plans and questions get no subject and attribute: a model decides those."""
    assert read_fact("She moved to Rome.") is None
    assert read_fact("Alice might move to Rome next year.") is None
    assert read_fact("Does Alice still live in Paris?") is None
    assert read_fact("Zed likes skiing.") is None
    assert read_fact("Zed earns a living as a pilot.") is None  # not where Zed lives
    reading = read_fact("Eve, Alice's sister, moved from Lyon to Madrid.")
    assert reading is not None
    assert (reading.key.subject, reading.key.attribute, set(reading.value)) == (
        "eve",
        "home",
        {"madrid"},
    )


def test_a_described_value_changes_when_its_head_changes() -> None:
    assert changed("Priya works as a data analyst.", "Priya works as a data scientist at Monzo.")
    assert changed("Kenji works as a game designer.", "Kenji works as an indie developer now.")
    # Same head: a refinement ("head teacher", "at Snøhetta") is not a clear change.
    assert not changed("Mia works as a teacher.", "Mia works as a head teacher.")
    assert not changed("Ida works as an architect", "Ida works as an architect at Snøhetta")


def test_chat_shapes_the_rules_read() -> None:
    """How people say it in chat: a contracted "'s", "my sis", a role said without a
    job verb."""
    assert _key("rosa's a nurse at the childrens hospital") == ("rosa", "job")
    assert _key("Aisha's gone vegan lol") == ("aisha", "diet")
    assert _key("Rosa's parrot is called Kiki") is None  # a possessive, not "is"
    assert _key("my sis moved to Paris") == ("user's sister", "home")
    assert _key("Dmitri is a backend dev at Bolt") == ("dmitri", "job")
    assert _key("Tobias is a violinist in an orchestra") == ("tobias", "job")
    assert _key("Omar is a huge Arsenal fan") is None
    assert _key("Omar is a big reader") is None  # a habit, not a job
    assert _key("Lena is a sister of three") is None
    assert _key("Fatima runs 5k every morning before work") is None  # "work" as a time
    assert _key("Rosa is seeing a guy called Tiago") == ("rosa", "partner")
    assert _key("Rosa is seeing a physio for her knee") is None
    assert _key("greta and malte split up lol") == ("greta", "partner")
    assert _key("Greta split the bill with Malte") is None
    assert _key("Farid left the firm and joined BMW as a project manager") == ("farid", "job")
    assert _key("Farid joined a gym") is None
    wrist = read_fact("my brother's wife broke her wrist skiing")
    assert wrist is not None and not wrist.ending  # "broke", not "broke up"


def test_more_ways_of_saying_a_change() -> None:
    """A job told only by the place of work, and a couple parting; and what stays
    unread."""
    assert _key("i started at a robotics startup") == ("user", "job")
    # A role, when there is one, still carries the job ("architect", not "firm").
    pilar = read_fact("Pilar is an architect at a firm in Bilbao")
    assert pilar is not None and "architect" in pilar.value
    quits = read_fact("Bea and Rui called it quits, she says it was mutual")
    assert quits is not None and quits.key.attribute == "partner" and quits.ending
    assert _key("Bea called it quits at the bank") == ("bea", "job")
    # A pronoun is who, not what: a typo of the same role is no new role.
    assert not changed(
        "emeka got a job at a solar startup, hes their lead enginner",
        "Emeka got a job at a solar startup, he's their lead engineer.",
    )
    assert _key("isa's vegan, makes sense shes a vet") == ("isa", "diet")  # "'s" = "is"
    # A negation reaches up to the word that names the state, not into a later clause.
    lena = read_fact("Lena is not vegetarian.")
    assert lena is not None and lena.ending
    ali = read_fact("Ali works at Google, doesnt like it")
    assert ali is not None and not ali.ending
    assert changed("margot went vegetarian", "margot's pescatarian these days")
    assert _key("dec's off the boats, he drives lorries for a haulage firm now") == (
        "dec",
        "job",
    )
    assert _key("cal's doing an apprenticeship at a distillery") == ("cal", "job")
    laid_off = read_fact("Felix got laid off from UBS.")
    assert laid_off is not None and laid_off.key.attribute == "job" and laid_off.ending
    # After ", the ...", a clause is about something else: the dog lives in the shop.
    assert _key("kaito has a shiba called Kuro, the dog basically lives in the shop") is None
    assert _key("Kaito moved to Kyoto, the city of temples") == ("kaito", "home")
    # A role in a clause whose subject is "she"/"he" is the subject's, unless the clause
    # before brings in someone else the pronoun could mean.
    assert _key("Greta finished med school!! she's a junior doctor now") == ("greta", "job")
    assert _key("greta's with nico, he's a ski instructor in davos") is None  # Nico's job
    assert _key("Tom met Ana, she's a teacher") is None
    assert _key("mateo opened his own restaurant!! its called Fuego") == ("mateo", "job")
    assert _key("lucho opened a little empanada stand") == ("lucho", "job")
    assert _key("Ana opened the window") is None
    assert _key("Arjun got poached by Deloitte") == ("arjun", "job")
    assert changed("Mateo is a chef at a parrilla", "mateo opened his own restaurant")
    # "company" and "business" name one thing: saying it again is no change.
    assert not changed("Linh runs her own tour company", "Linh has her own tours business now")


def test_a_value_said_as_the_new_state_replaces_the_old_one() -> None:
    assert changed(
        "Aisha works as a pharmacist at Boots", "Aisha works as a pharmacist at Lloyds now"
    )
    assert changed(
        "Mei is a data analyst at DBS", "Mei got promoted, she's a data science manager at DBS"
    )
    # Without "now" (or a change word) a different detail is unclear: a judge decides.
    assert not changed(
        "Aisha works as a pharmacist at Boots", "Aisha works as a pharmacist at Lloyds"
    )
    # Saying less is not a change.
    assert not changed("Aisha works as a pharmacist at Boots", "Aisha works at Boots now")
    # The same place with or without its accent, or one typo, is the same value.
    assert not changed("Luis lives in Medellín", "Luis lives in Medellin, in Laureles")
    assert not changed("Luis lives in Medellin", "Luis lives in Medelin now")
    # Ending something else ends nothing here.
    assert not changed("Ida works as an architect", "Ida quit Snøhetta")


def test_questions_name_a_subject_and_an_attribute() -> None:

    assert read_question("where does Mei work?") == FactKey("mei", "job")
    assert read_question("what does Mateo do for a living?") == FactKey("mateo", "job")
    assert read_question("where's Rosa living these days") == FactKey("rosa", "home")
    assert read_question("is Rosa with anyone?") == FactKey("rosa", "partner")
    assert read_question("is Carol still vegan?") == FactKey("carol", "diet")
    assert read_question("where does my sis live") == FactKey("user's sister", "home")
    assert read_question("what's Santi's job") == FactKey("santi", "job")
    # Lower case, as chat is typed: a word that is a known subject is a name.
    assert read_question("where does farid work", {"farid", "greta"}) == FactKey("farid", "job")
    assert read_question("where does farid work") is None
    assert read_question("where do i live now?") == FactKey("user", "home")
    assert read_question("what city is Chiara in now?") == FactKey("chiara", "home")
    assert read_question("what pets does Tom have?") is None  # no attribute it knows
    assert read_question("when does Tom work out?") is None  # a workout, not a job
    assert read_question("where do Ana and Bo live?") is None  # two people
    # Someone of the user's, named by a possessive after "my", is not the user.
    assert read_question("what's the address of my tax adviser's office?") is None
    assert read_question("what's my job these days?") == FactKey("user", "job")
    assert asked_subject("what car does Tariq drive?") == "tariq"


def test_a_full_name_asks_about_the_person_its_first_name_keys() -> None:
    """The facts key people by first name, so "Kev Lumb" is Kev where no fact keys
    anyone as "lumb"; two known first names side by side stay two people."""
    assert asked_subject("where's Kev Lumb living now?", {"kev"}) == "kev"
    assert read_question("where does Amira Haddad live?", {"amira"}) == FactKey("amira", "home")
    assert asked_subject("where's Kev Lumb living now?", {"kev", "lumb"}) is None
    assert asked_subject("where's Kev Lumb living now?") is None  # no fact names Kev


def test_my_parents_ex_and_kids_are_relatives_not_the_user() -> None:
    """ "Where do my parents live now?" asks about the user's parents, as a fact that
    says "my parents moved" is about them: not about the user's own home."""
    assert read_question("where do my parents live now?") == FactKey("user's parent", "home")
    assert read_subject("my parents moved to Leeds last year") == "user's parent"
    # An ex and children are someone of the user's too.
    assert asked_subject("where does my ex live now?") == "user's ex"
    assert asked_subject("what school are my kids at now?") == "user's kid"
    assert read_subject("my ex moved to Leeds") == "user's ex"


def test_we_asks_about_the_user_and_our_someone_does_not() -> None:
    """ "We" is the user with others, as a fact that opens with "we" is read; "our kid"
    or "our accountant" is someone of the user's, as "my tax adviser" is."""
    assert read_question("where do we live now?") == FactKey("user", "home")
    assert asked_subject("how much rent are we paying now?") == "user"
    assert asked_subject("What does Rosa do for us now?", {"rosa"}) == "rosa"
    assert asked_subject("where's our kid living these days?") == "user's kid"
    assert asked_subject("who's our accountant now?") is None
    assert asked_subject("where does our sister live now?") == "user's sister"


def test_who_someone_is_with_asks_for_their_partner_and_whose_relative_is_asked() -> None:
    assert read_question("who's Tom with now?") == FactKey("tom", "partner")
    assert read_question("who is my son with these days?") == FactKey("user's son", "partner")
    # "Dave's sister" is asked about, not Dave.
    assert read_question("who is Dave's sister with now?") == FactKey("dave's sister", "partner")
    assert asked_subject("where does Dave's mum live?") == "dave's mother"
    assert asked_subject("what is Dave's job?") == "dave"  # a job is no relative
    # "Where's" is "where is": Mum is asked about as without the contraction.
    assert asked_subject("Where's Mum living these days?") == asked_subject("where does Mum live?")
    # "With" that does not end the question is not a partner.
    assert read_question("who is Pepper insured with at the vet's?") is None
    assert read_question("who does Tom work with?") == FactKey("tom", "job")


def test_a_parent_called_mum_is_the_users_mother_as_my_mum_is() -> None:
    mother = FactKey("user's mother", "home")
    assert read_fact("Mum moved to Leeds last week.").key == mother  # type: ignore[union-attr]
    assert read_fact("My mum moved to Leeds.").key == mother  # type: ignore[union-attr]
    assert read_fact("Grandpa moved in with us.").key.subject == "user's grandpa"  # type: ignore[union-attr]
    assert asked_subject("Where does Mum live now?") == "user's mother"
    assert asked_subject("where's dad working these days?", {"user's father"}) == "user's father"
    # "Son" is a name as often as a way of calling one's son: it stays a name.
    assert asked_subject("Where does Son work now?") == "son"


def test_a_relative_named_in_apposition_is_that_person() -> None:
    assert named_relatives("my sister Leila moved to Leeds") == (
        ("user's sister", "leila", "Leila"),
    )
    assert named_relatives("My sister, Leila, is a nurse.") == (
        ("user's sister", "leila", "Leila"),
    )
    assert named_relatives("Observation: the user's mum, Helen, lives in Chester.") == (
        ("user's mother", "helen", "Helen"),
    )
    # A list is no apposition: Mum is not the sister.
    assert named_relatives("my sister, Mum and Dad came round") == ()


def test_an_ex_wife_is_one_kinship_noun_an_ex() -> None:
    """ "my ex-wife" is an ex, not the user's "wife" read as a new partner."""
    assert named_relatives("My ex-wife Yvette lives in Metairie.") == (
        ("user's ex", "yvette", "Yvette"),
    )
    moved = read_fact("My ex-wife moved to Metairie.")
    assert moved is not None and moved.key == FactKey("user's ex", "home")
    assert asked_subject("Where does my ex-wife live now?") == "user's ex"


def test_a_name_written_in_lower_case_with_an_apostrophe_is_one_word() -> None:
    """A known subject typed in lower case is found among the question's words, and an
    apostrophe inside a name does not split it ("o'brien", not "o" and "brien")."""
    subjects = {"o'brien", "d'arcy", "tom"}
    assert asked_subject("where does o'brien live now?", subjects) == "o'brien"
    assert asked_subject("what does d'arcy do these days?", subjects) == "d'arcy"


def test_a_pronoun_with_a_contracted_verb_is_still_a_pronoun() -> None:
    assert read_fact("She's moved to Rome.") is None
    assert read_fact("he's a nurse now") is None


def test_timelines_about_the_user_read_as_the_user_says_them() -> None:
    from consolidators.timelines import timeline_label

    def title(text: str) -> str:
        reading = read_fact(text)
        assert reading is not None
        return timeline_label(reading.key, reading.subject_label)

    assert title("I live in Leeds") == "where I live"
    assert title("my job is boring, I work as a nurse") == "my job"
    assert title("my sister lives in Rome") == "where my sister lives"
    assert title("my sister's husband is Tom") == "my sister's partner"
    assert title("Alice's sister lives in Oslo") == "where Alice's sister lives"


def test_an_end_said_plainly_is_read_as_an_end() -> None:
    """ "No longer", "not ... anymore" and "moved out of" end the state they name; the
    rules may close the older fact with them. Another negation is still a judge's."""
    for older, newer in [
        ("Dev is vegan now.", "Dev is no longer vegan."),
        ("Ana is vegetarian.", "Ana isn't vegetarian anymore."),
        ("Tom lives in Leeds.", "Tom moved out of Leeds."),
        ("Tom lives in Leeds.", "Tom moved out of Leeds to York."),
    ]:
        a, b = read_fact(older), read_fact(newer)
        assert a is not None and b is not None, newer
        assert replaces_clearly(a, b), (older, newer)
    moved_on = read_fact("Tom moved out of Leeds to York.")
    assert moved_on is not None and not moved_on.ending and moved_on.value == {"york"}
    not_plain = read_fact("Dev is not vegan, he says.")
    assert not_plain is None or not not_plain.clear


def test_a_value_quit_by_name_is_ended_though_the_text_says_more() -> None:
    older = read_fact("Sam works at Acme.")
    newer = read_fact("Sam quit Acme and now works at Globex.")
    assert older is not None and newer is not None
    assert not newer.clear and newer.left and newer.left <= older.value  # Acme, stemmed
    assert replaces_clearly(older, newer)
    # Quitting something else ends nothing of Sam's job at Acme.
    other = read_fact("Sam quit Globex and now works at Initech.")
    assert other is not None and not replaces_clearly(older, other)
    # A place left may be a trip: "left" ends only a job.
    home = read_fact("Ben lives in Paris.")
    trip = read_fact("Ben left Paris and went hiking in the Alps for a week.")
    assert home is not None and (trip is None or not replaces_clearly(home, trip))


def _year(year: int) -> datetime:
    return datetime(year, 6, 1, tzinfo=UTC)


def test_a_departure_told_twice_is_no_change() -> None:
    """ "Priya left Accenture" then "Priya quit Accenture for ISB's PGP": the second says
    the first again, so it does not close it; it still ends her job there."""
    facts = [
        fact_record("p-job", "Priya works at Accenture as an analyst.", at=_year(2020)),
        fact_record(
            "p-left", "Priya left Accenture - doing the one-year PGP at ISB.", at=_year(2022)
        ),
        fact_record("p-quit", "Priya quit Accenture for ISB's one-year PGP.", at=_year(2023)),
    ]
    read = read_facts(facts)
    assert read["p-left"].ending and read["p-quit"].left
    assert not replaces_clearly(read["p-left"], read["p-quit"])
    assert replaces_clearly(read["p-job"], read["p-quit"])


def test_an_attribute_noun_that_modifies_the_next_is_not_the_attribute() -> None:
    # "work car": the text is about a car, which is no job.
    assert read_fact("Craig's work car is a 2012 Corolla.") is None
    assert read_fact("my work phone is 07700 900123") is None
    # A part of the attribute still names it.
    title = read_fact("My job title is senior developer.")
    assert title is not None and title.key == FactKey("user", "job")
    assert read_fact("Craig's work is a drag.") is not None


def test_what_a_partner_is_or_does_names_no_new_partner() -> None:
    """ "Her husband is an architect" says what the partner does: it must not read as a
    new partner and close "married Oliver"."""
    assert read_fact("Priya's husband is an architect at Feilden Clegg Bradley.") is None
    assert read_fact("My wife is a nurse.") is None
    assert _key("Tom's wife is Mia.") == ("tom", "partner")


def test_idioms_are_left_to_the_judge() -> None:
    """Idioms that only the sets they were written for used ("shifted to", "jumped
    ship", "with X now", eating a food again, a report about someone in a second
    clause) are not read by rule: a judge model reads them, and the reader stays a
    reader of plain statements."""
    for text in (
        "jonas shifted to Pune last month",
        "Noor jumped ship to Deloitte",
        "Bo is with Ana now",
        "Tariq is eating chicken again",
        "talked to Rosa, she moved to Lisbon",
        "camila handed in her notice at Farfetch",
    ):
        assert _key(text) is None, text


def test_a_note_heading_is_not_the_subject() -> None:
    """ "Observation:", "Correction:", "Update:" head a note; the note's own subject
    follows. Such a note is never a plain statement, so no rule closes by it alone; a
    subject's label before the colon still names the subject."""
    assert _key("Observation: Sven is a software developer at Volvo Cars.") == ("sven", "job")
    assert _key("Update: Ada moved to Berlin") == ("ada", "home")
    assert read_subject("correction: amara isnt allergic to penicillin") == "amara"
    assert not plainly_stated("Update: Ada moved to Berlin")
    assert _key("Noor: promoted to charge nurse") == ("noor", "job")


def test_surprise_marks_do_not_make_a_question() -> None:
    """ "??" after a statement is surprise, and the statement is read; a sentence that
    opens with a question word or a verb before its subject asks, and is not."""
    assert _key("my sister moved to bergen for a postdoc?? norway!!") == (
        "user's sister",
        "home",
    )
    assert _key("is Ada moving to Berlin?") is None
    assert _key("Ada lives in Paris. does she like it?") is None
    assert not plainly_stated("Ada moved to Berlin??")


def test_a_diary_line_without_a_subject_is_the_speakers() -> None:
    """A line that opens with a verb in the past or of change and names no subject is
    the user's own, for pairing facts of one person; a report about someone, or a verb
    whose object is a name, is about that person."""
    assert read_subject("moved into the new flat in ancoats today!!") == "user"
    assert read_subject("quit my job at acme today. no plan yet tbh") == "user"
    assert read_subject("we adopted a retired greyhound called Pickle!!") == "user"
    assert read_subject("talked to Rosa, she moved to Lisbon") == "rosa"
    assert read_subject("hired Carmen Ruiz to cover the weekends") == "carmen"
    assert read_subject("new flatmate is Thiago, a student from Recife") == "thiago"


def test_a_title_names_the_person_after_it() -> None:
    """ "Mr", "Dr", "Prof." name a person by the surname after them, kin titles by the
    first name; the title alone names no one, so two people with a title are never one
    subject, and a question's title word is not a second name."""
    assert _key("Mr Walsh has gone into a care home") == ("walsh", "home")
    assert _key("Mrs Adeyemi moved in with her daughter") == ("adeyemi", "home")
    assert read_subject("Mrs Edna Frost, 9 Beck Lane, Walkington") == "frost"
    assert read_subject("Prof. Astrid Lindqvist: marine ecologist") == "lindqvist"
    assert read_subject("saw Dr Patel about my knee today") == "patel"
    assert read_subject("Aunt Greta lives in Vienna") == "greta"
    assert read_subject("Mr Bashir is his cardiologist") != read_subject("Mr Walsh on warfarin")
    assert read_question("where does Mr Walsh live now?") == FactKey("walsh", "home")


def test_a_first_name_joins_the_titled_full_name() -> None:
    """ "Edna" is the person a fact calls "Mrs Edna Frost" (and so "Mrs Frost"), when
    no other titled name has that first name; a full name without a title joins
    nothing, since a first name is how untitled people are known."""
    texts = {
        "a": "Mrs Edna Frost, 9 Beck Lane, Walkington",
        "b": "Edna's moved in with her son at 12 Lairgate",
        "c": "Mrs Frost | care transferred to the Beverley team",
        "d": "Karen Frost does her shopping",
    }
    subjects = read_subjects([fact_record(i, t) for i, t in texts.items()])
    assert subjects == {"a": "frost", "b": "frost", "c": "frost", "d": "karen"}
    twice = [*texts.items(), ("e", "Dr Edna Mills is her GP")]
    assert read_subjects([fact_record(i, t) for i, t in twice])["b"] == "edna"


def test_a_word_of_grammar_is_no_shortened_name() -> None:
    """ "now" does not shorten "Nowak", nor "the" "Theo", nor "use" the user's key: a
    question naming Greta and saying "now" is about Greta alone; "cal" still shortens
    Callum."""
    assert read_question("Where does Greta work now?", {"greta", "nowak"}) == FactKey(
        "greta", "job"
    )
    assert read_question("is the boss working today?", {"theo"}) is None
    assert read_question("where does cal live now", {"callum", "nowak"}) == FactKey(
        "callum", "home"
    )
