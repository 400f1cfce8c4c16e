"""Deterministic generator of an embedded TinyStories-like corpus.

The CPU scale of the suite cannot download TinyStories, so it trains on simple English children's
stories generated here from a seed. A story has a main character and a friend (names, kinds and
pronouns reused consistently), a family member, a place with its own details, a favourite object
with its own colour and verb, maybe a pet, emotions, one or two episodes with cause and effect
(from a dozen plot shapes), dialogue and a closing moral. The closed vocabulary and the sentence
shapes make it learnable by a sub-million-parameter GPT; the many combinations, the
place-/object-specific words and the long-range consistency (a name, a colour or a pet introduced
at the start and reused later) keep its loss falling for thousands of steps.

Only ``random.Random(seed)`` is used (no string hashing, no set iteration order), so the output is
identical for the same ``(n, seed)`` in every process and every Python run.
"""

from __future__ import annotations

import json
import os
import random
from collections.abc import Callable
from importlib import resources

__all__ = ["generate_stories", "write_story_jsonl"]


# The lexicon (names, animals as (kind, sound, move), places as (place, preposition, details), objects
# as (object, adjectives, verb), foods, activities, family, weather, feelings, times, transitions and
# openings) is data: stories_lexicon.json beside this file, read once; its lists become tuples in their
# file order, so ``rng.choice`` over them is reproducible.
def _as_tuples(value):
    return tuple(_as_tuples(v) for v in value) if isinstance(value, list) else value


def _read_lexicon() -> dict[str, tuple]:
    text = resources.files(__package__).joinpath("stories_lexicon.json").read_text(encoding="utf-8")
    return {name: _as_tuples(words) for name, words in json.loads(text).items()}


_LEXICON = _read_lexicon()
GIRL_NAMES: tuple = _LEXICON["GIRL_NAMES"]
BOY_NAMES: tuple = _LEXICON["BOY_NAMES"]
ANIMALS: tuple = _LEXICON["ANIMALS"]
PETS: tuple = _LEXICON["PETS"]
CHAR_ADJ: tuple = _LEXICON["CHAR_ADJ"]
PLACES: tuple = _LEXICON["PLACES"]
OBJECTS: tuple = _LEXICON["OBJECTS"]
FOODS: tuple = _LEXICON["FOODS"]
ACTIVITIES: tuple = _LEXICON["ACTIVITIES"]
FAMILY: tuple = _LEXICON["FAMILY"]
_FEMALE_FAMILY: tuple = _LEXICON["_FEMALE_FAMILY"]
WEATHER_GOOD: tuple = _LEXICON["WEATHER_GOOD"]
WEATHER_BAD: tuple = _LEXICON["WEATHER_BAD"]
HAPPY: tuple = _LEXICON["HAPPY"]
SAD: tuple = _LEXICON["SAD"]
TIMES: tuple = _LEXICON["TIMES"]
TRANSITIONS: tuple = _LEXICON["TRANSITIONS"]
OPENINGS: tuple = _LEXICON["OPENINGS"]


class _Char:
    """A story character: name, kind and pronouns, reused consistently in one story."""

    def __init__(self, name: str, kind: str, female: bool, sound: str = "", move: str = ""):
        self.name = name
        self.kind = kind
        self.he = "she" if female else "he"
        self.him = "her" if female else "him"
        self.his = "her" if female else "his"
        self.sound = sound
        self.move = move or "ran"

    @property
    def He(self) -> str:
        return self.he.capitalize()

    @property
    def His(self) -> str:
        return self.his.capitalize()


def _make_char(rng: random.Random, avoid: str = "") -> _Char:
    female = rng.random() < 0.5
    names = GIRL_NAMES if female else BOY_NAMES
    name = rng.choice(names)
    while name == avoid:
        name = rng.choice(names)
    if rng.random() < 0.4:
        kind, sound, move = rng.choice(ANIMALS)
        return _Char(name, kind, female, sound, move)
    return _Char(name, "girl" if female else "boy", female)


def _a(phrase: str) -> str:
    return ("an " if phrase[0] in "aeiou" else "a ") + phrase


def _cap(s: str) -> str:
    return s[0].upper() + s[1:]


class _Story:
    """The cast and setting of one story plus helpers that produce sentences."""

    def __init__(self, rng: random.Random):
        self.rng = rng
        self.hero = _make_char(rng)
        self.friend = _make_char(rng, avoid=self.hero.name)
        self.place, self.prep, self.details = rng.choice(PLACES)
        self.obj, adjs, self.overb = rng.choice(OBJECTS)
        self.oadj = rng.choice(adjs)
        self.food, self.foodadj = rng.choice(FOODS)
        self.family = rng.choice(FAMILY)
        self.activity = rng.choice(ACTIVITIES)
        self.adj = rng.choice(CHAR_ADJ)
        self.pet = rng.choice(PETS) if rng.random() < 0.3 else None
        self.friend_known = False

    def pick(self, *options: str) -> str:
        return self.rng.choice(options)

    def chance(self, p: float) -> bool:
        return self.rng.random() < p

    def fmt(self, template: str) -> str:
        h, f = self.hero, self.friend
        return template.format(
            name=h.name,
            he=h.he,
            He=h.He,
            him=h.him,
            his=h.his,
            His=h.His,
            kind=h.kind,
            fname=f.name,
            fhe=f.he,
            fHe=f.He,
            fhim=f.him,
            fhis=f.his,
            fkind=f.kind,
            place=self.place,
            prep=self.prep,
            detail=self.rng.choice(self.details),
            obj=self.obj,
            oadj=self.oadj,
            overb=self.overb,
            food=self.food,
            foodadj=self.foodadj,
            family=self.family,
            famhe="she" if self.family in _FEMALE_FAMILY else "he",
            activity=self.activity,
            adj=self.adj,
            pet=self.pet[1] if self.pet else "",
            petkind=self.pet[0] if self.pet else "",
            happy=self.rng.choice(HAPPY),
            sad=self.rng.choice(SAD),
            time=self.rng.choice(TIMES),
            good=self.rng.choice(WEATHER_GOOD),
            bad=self.rng.choice(WEATHER_BAD),
        )

    def say(self, speaker: _Char, line: str) -> str:
        verb = "said"
        if line.endswith("?") and self.chance(0.6):
            verb = "asked"
        elif line.endswith("!") and self.chance(0.4):
            verb = self.pick("shouted", "cried", "yelled")
        elif self.chance(0.15):
            verb = self.pick("whispered", "replied", "said softly")
        r = self.rng.random()
        if r < 0.45:  # "Line," said Name.
            if line.endswith("."):
                return f'"{line[:-1]}," {verb} {speaker.name}.'
            return f'"{line}" {verb} {speaker.name}.'
        if r < 0.55:  # "Line," Name said.
            if line.endswith("."):
                return f'"{line[:-1]}," {speaker.name} {verb}.'
            return f'"{line}" {speaker.name} {verb}.'
        return f'{speaker.name} {verb}, "{line}"'

    def meet_friend(self) -> str:
        """How to name the friend: introduce them the first time, by name afterwards."""
        if self.friend_known:
            return self.friend.name
        self.friend_known = True
        return f"{_a(self.friend.kind)} named {self.friend.name}"

    def friend_intro(self) -> list[str]:
        if self.friend_known:
            return []
        self.friend_known = True
        return [
            self.fmt(
                self.pick(
                    "{His} best friend was {fname}, {a_fkind}.",
                    "{He} had a friend named {fname}. {fname} was {a_fkind}.",
                    "{fname} the {fkind} was {his} friend.",
                    "{name} had a good friend, {a_fkind} named {fname}.",
                ).replace("{a_fkind}", _a(self.friend.kind))
            )
        ]

    # ---- building blocks --------------------------------------------------------------------
    def opening(self, friend: bool) -> list[str]:
        out = [self.fmt(self.pick(*OPENINGS))]
        out.append(
            self.fmt(
                self.pick(
                    "{He} lived {prep} {place} with {his} {family}.",
                    "{He} lived near {place}.",
                    "{He} loved to {activity}.",
                    "Every day, {he} liked to {activity}.",
                    "{He} had {a_oadj_obj} that {he} loved very much.",
                    "{His} favorite thing was {his} {oadj} {obj}. {He} liked to {overb} it every day.",
                ).replace("{a_oadj_obj}", _a(self.oadj + " " + self.obj))
            )
        )
        if self.pet and self.chance(0.7):
            out.append(self.fmt("{He} had a pet {petkind} named {pet}."))
        else:
            self.pet = None
        if self.chance(0.35):
            d1, d2 = self.rng.sample(self.details, 2)
            out.append(
                self.fmt(
                    self.pick(
                        "{place} had " + d1 + " and " + d2 + ".",
                        "{name} liked {place} because it had " + d1 + ".",
                    )
                )
            )
        if friend:
            out += self.friend_intro()
        return out

    def moral(self, lesson: str) -> list[str]:
        forms = [
            "From that day on, {name} knew that " + lesson + ".",
            "{name} learned that " + lesson + ".",
            "That day, {name} learned an important lesson: " + lesson + ".",
            "{name} now knew that " + lesson + ".",
        ]
        if self.friend_known:
            forms.append("And so, {name} and {fname} learned that " + lesson + ".")
        out = [self.fmt(self.pick(*forms))]
        r = self.rng.random()
        if self.hero.sound and r < 0.25:
            out.append(self.fmt('{name} the {kind} said "' + self.hero.sound + '!" with joy.'))
        elif self.pet and r < 0.45:
            out.append(self.fmt("{pet} the {petkind} was happy too."))
        elif r < 0.75:
            endings = [
                "{He} was very {happy}.",
                "The end.",
                "{He} smiled and went to sleep.",
                "{He} went home to tell {his} {family} all about it.",
            ]
            if self.friend_known:
                endings += ["They played together every day after that.", "{name} and {fname} were friends forever."]
            out.append(self.fmt(self.pick(*endings)))
        return out


# --------------------------------------------------------------------------------------------
# Episodes: each returns (sentences, lessons). ``lead`` starts the episode ("One day" or a
# transition when it is the second episode of a story).
# --------------------------------------------------------------------------------------------
def _ep_lost_object(s: _Story, lead: str) -> tuple[list[str], tuple[str, ...]]:
    h, f = s.hero, s.friend
    out = [s.fmt(lead + ", {name} went to {place} to {overb} {his} {oadj} {obj}.")]
    out.append(
        s.fmt(
            s.pick(
                "{He} played and played until the sun went down.",
                "{He} was having so much fun near {detail}.",
                "{He} played next to {detail} for a long time.",
            )
        )
    )
    out.append(
        s.fmt(
            s.pick(
                "But when {he} looked down, the {obj} was gone!",
                "Then {he} put the {obj} down and ran to look at a bug. When {he} came back, the {obj} was not there.",
                "Suddenly, a big wind came and took the {obj} away.",
            )
        )
    )
    out.append(s.fmt("{name} felt {sad}."))
    out.append(
        s.say(h, s.pick(f"Where is my {s.obj}?", f"I lost my {s.obj}!", f"Has anyone seen my {s.oadj} {s.obj}?"))
    )
    who = s.meet_friend()
    out.append(
        s.fmt(
            s.pick(
                "Just then, " + who + " came by.",
                who[0].upper() + who[1:] + " heard {him} and came to help.",
            )
        )
    )
    out.append(
        s.say(
            f,
            s.pick(
                "Do not be sad. I will help you look.", "Let's look together!", f"I can help you find it, {h.name}."
            ),
        )
    )
    out.append(s.fmt(s.pick("They looked everywhere.", "They looked high and low.", "They searched for a long time.")))
    spot = s.pick(
        "under a tree",
        "behind a big rock",
        "next to the water",
        "in a bush",
        "under the bench",
        "in the tall grass",
        "near {detail}",
    )
    out.append(s.fmt("At last, {fname} found the {oadj} {obj} " + spot + "."))
    out.append(s.say(h, s.pick(f"Thank you, {f.name}! You are a good friend.", "You found it! Thank you so much!")))
    out.append(s.fmt("{name} hugged {fname}. {He} was so {happy}."))
    return out, ("friends help each other", "it is good to ask for help", "you should take care of your things")


def _ep_sharing(s: _Story, lead: str) -> tuple[list[str], tuple[str, ...]]:
    h, f = s.hero, s.friend
    out = s.friend_intro()
    food = s.chance(0.5)
    thing = s.food if food else s.obj
    out.append(
        s.fmt(
            s.pick(
                lead + ", {name}'s {family} gave {him} " + _a(s.foodadj + " " + s.food) + ".",
                lead + ", {name} found " + _a(s.foodadj + " " + s.food) + " on the table.",
            )
            if food
            else s.pick(
                lead + ", {name} got a new {oadj} {obj} from {his} {family}.",
                lead + ", {name} took {his} {oadj} {obj} to {place}.",
            )
        )
    )
    out.append(s.fmt("{fname} saw it and wanted " + ("some" if food else "to play with it") + " too."))
    out.append(
        s.say(
            f,
            s.pick(
                f"Can I have some of your {thing}?",
                f"Will you share your {thing} with me?",
                f"I like your {thing}. Can I try?",
            )
            if food
            else s.pick(f"Can I {s.overb} your {s.obj}?", f"Will you share your {s.obj} with me?"),
        )
    )
    if s.chance(0.5):
        out.append(s.say(h, s.pick(f"No! The {thing} is mine!", "No, it is all for me!", "Go away!")))
        out.append(s.fmt("{fname} felt {sad} and walked away."))
        out.append(
            s.fmt(
                s.pick(
                    "Then {name} was all alone. It was not fun to be alone.",
                    "Soon {name} did not feel good. {He} missed {his} friend.",
                    "{name} looked at the " + thing + ". It did not make {him} happy anymore.",
                )
            )
        )
        out.append(s.fmt("{name} ran to {fname}."))
        out.append(
            s.say(
                h,
                s.pick(
                    f"I am sorry, {f.name}. Let's share.",
                    "I was wrong. You can have half." if food else "I was wrong. We can play together.",
                ),
            )
        )
        out.append(s.fmt("{fname} smiled, and they shared the " + thing + " together."))
    else:
        out.append(s.say(h, s.pick("Yes, of course! Let's share.", f"Sure, {f.name}! Here you go.")))
        out.append(
            s.fmt("{name} gave half of the {food} to {fname}." if food else "{name} let {fname} {overb} the {obj}.")
        )
        out.append(s.fmt("{fname} was very {happy}, and so was {name}."))
        out.append(
            s.fmt(
                s.pick(
                    "Because {name} was kind, {fname} shared {fhis} toys too.",
                    "The next day, {fname} brought a gift for {name}.",
                )
            )
        )
    return out, ("sharing makes everyone happy", "it is good to share", "being kind is better than being greedy")


def _ep_fear(s: _Story, lead: str) -> tuple[list[str], tuple[str, ...]]:
    h, f = s.hero, s.friend
    scary = s.pick(
        "the dark",
        "the big slide",
        "the deep water",
        "the loud thunder",
        "the tall tree",
        "the old bridge",
        "the big dog",
        "the high swing",
        "the bees",
    )
    out = s.friend_intro()
    out.append(s.fmt("{name} was afraid of " + scary + "."))
    out.append(s.fmt(lead + ", {name} and {fname} went to {place}."))
    out.append(s.fmt("There they saw " + scary + "."))
    out.append(s.say(f, s.pick("Come on! Let's go!", "Do you want to try?", "It will be fun!")))
    out.append(s.say(h, s.pick("I am scared.", "No, I do not want to.", "What if I get hurt?")))
    out.append(s.fmt(s.pick("{fname} held {his} hand.", "{fname} sat next to {him}.", "{fname} smiled at {him}.")))
    out.append(
        s.say(
            f,
            s.pick(
                "I will be with you. You can do it.",
                "Be brave. I am right here.",
                "Take a deep breath. We can do it together.",
            ),
        )
    )
    out.append(s.fmt("{name} took a deep breath and tried."))
    out.append(
        s.fmt(
            s.pick(
                "It was not scary at all! It was fun!",
                "{He} felt a little scared, but then {he} felt brave.",
                "Soon {he} was laughing.",
            )
        )
    )
    out.append(s.say(h, s.pick("I did it!", "That was fun! Let's do it again!", f"Thank you, {f.name}!")))
    return out, ("being brave is good", "friends make you brave", "trying new things can be fun")


_PROBLEMS = (
    ("was stuck in a tree", "climbed up and helped {fhim} down"),
    ("had a hurt leg", "helped {fhim} walk home"),
    ("could not reach the {food}", "got a stick and pulled it down"),
    ("was lost and could not find {fhis} home", "showed {fhim} the way home"),
    ("was stuck in the mud", "pulled {fhim} out with a rope"),
    ("had dropped {fhis} hat in the water", "used a long stick to get it back"),
    ("was cold and had no coat", "gave {fhim} {his} warm blanket"),
    ("was hungry", "gave {fhim} {his} {food}"),
)


def _ep_helping(s: _Story, lead: str) -> tuple[list[str], tuple[str, ...]]:
    h, f = s.hero, s.friend
    problem = s.rng.choice(_PROBLEMS)
    out = [s.fmt(lead + ", the weather was {good}, so {name} went to {place}.")]
    who = s.meet_friend()
    out.append(s.fmt("There {he} saw " + who + ". {fname} " + problem[0] + "."))
    out.append(s.say(f, s.pick("Help! Help me, please!", "Can you help me?", "Oh no! What do I do?")))
    out.append(s.fmt(s.pick("{name} wanted to help.", "{name} did not want {fname} to be sad.", "{name} had an idea.")))
    out.append(s.say(h, s.pick("Do not worry. I will help you!", "I know what to do!", "Wait, I am coming!")))
    out.append(s.fmt("{name} " + problem[1] + "."))
    out.append(s.fmt("{fname} was so {happy}."))
    out.append(s.say(f, s.pick("Thank you! You are very kind.", f"Thank you, {h.name}! You saved me!")))
    if s.chance(0.4):
        out.append(s.fmt("To say thank you, {fname} gave {name} " + _a(s.foodadj + " " + s.food) + "."))
    return out, ("helping others feels good", "it is good to be kind", "a good friend always helps")


_RULES = (
    ("not to go near the river", "went near the river", "slipped and fell in the water"),
    ("not to touch the hot stove", "touched the stove", "hurt {his} hand"),
    ("not to play with the {obj} in the house", "played with the {obj} in the house", "broke a vase"),
    ("to stay close", "ran far away", "got lost"),
    ("not to eat too much {food}", "ate all the {food}", "got a bad tummy ache"),
    ("not to climb the tall tree", "climbed the tall tree", "got stuck at the top"),
    ("to wear a coat", "went out without a coat", "got very cold"),
    ("to put the {obj} away", "left the {obj} on the floor", "tripped over it and fell"),
)


def _ep_disobey(s: _Story, lead: str) -> tuple[list[str], tuple[str, ...]]:
    h = s.hero
    rule = s.rng.choice(_RULES)
    out = [s.fmt("{name}'s {family} told {him} " + rule[0] + ".")]
    out.append(
        s.fmt(
            s.pick(
                "But {name} did not listen.",
                "But {name} was very curious.",
                "{name} said yes, but {he} did not mean it.",
            )
        )
    )
    out.append(s.fmt(lead + ", {name} " + rule[1] + "."))
    out.append(s.fmt(s.pick("Because {he} did not listen, {he} ", "Oh no! {He} ", "Then {he} ") + rule[2] + "."))
    out.append(s.fmt("{name} felt {sad}."))
    out.append(s.say(h, s.pick("Help!", "Oh no! I am sorry!", f"{s.family.capitalize()}, help me!")))
    out.append(s.fmt("{His} {family} came quickly and helped {him}."))
    out.append(s.say(h, s.pick("I am sorry. I should have listened.", "I will listen next time.")))
    out.append(s.fmt(s.pick("{His} {family} gave {him} a big hug.", "{His} {family} smiled and said it was okay.")))
    return out, ("it is important to listen", "rules keep us safe", "you should listen to your " + s.family)


_MAKES = (
    ("a sand castle", "sand"),
    ("a big tower", "blocks"),
    ("a card for {his} {family}", "paper"),
    ("a snowman", "snow"),
    ("a little house for a bird", "sticks"),
    ("a cake", "flour and eggs"),
    ("a boat", "wood"),
    ("a kite", "paper and string"),
    ("a crown", "gold paper"),
    ("a picture of {place}", "crayons"),
)


def _ep_make(s: _Story, lead: str) -> tuple[list[str], tuple[str, ...]]:
    h, f = s.hero, s.friend
    thing, material = s.rng.choice(_MAKES)
    out = [s.fmt(lead + ", {name} wanted to make " + thing + ".")]
    out.append(s.fmt("{He} got some " + material + " and started to work."))
    out.append(
        s.fmt(
            s.pick(
                "But it was hard. It fell down again and again.",
                "But it did not look right. {name} felt {sad}.",
                "But {he} did not know how to finish it.",
            )
        )
    )
    out.append(s.say(h, s.pick("I can not do it!", "This is too hard!", "Why is this so hard?")))
    who = s.meet_friend()
    out.append(s.fmt(_cap(who) + " came to see what {name} was doing."))
    out.append(s.say(f, s.pick("Let's do it together!", "Do not give up. Try again.", "Maybe we can try a new way.")))
    out.append(
        s.fmt(
            s.pick(
                "They worked together all day.",
                "They tried again, slowly and carefully.",
                "{fname} held it while {name} worked.",
            )
        )
    )
    out.append(s.fmt("At last, they made " + thing + "! It was beautiful."))
    out.append(s.say(h, s.pick("We did it!", "Look what we made!")))
    out.append(s.fmt("They were both very {happy}."))
    return out, ("you should never give up", "working together makes things easy", "if you keep trying, you can do it")


def _ep_weather(s: _Story, lead: str) -> tuple[list[str], tuple[str, ...]]:
    h = s.hero
    out = [s.fmt(lead + ", {name} wanted to go to {place} and {activity}.")]
    out.append(s.fmt("But the sky was {bad}, and it started to rain."))
    out.append(s.fmt("{name} was {sad} because {he} could not go outside."))
    out.append(s.say(h, s.pick("I want to play outside!", "Why does it have to rain?", "Now there is nothing to do.")))
    if s.chance(0.5):
        out.append(s.fmt("{His} {family} had an idea."))
    else:
        out.append(s.fmt("Then " + s.meet_friend() + " came over to play."))
    inside = s.pick(
        "build a fort with blankets",
        "play a game with the {obj}",
        "bake a {food}",
        "draw a big picture",
        "read a book about the sea",
        "sing songs",
    )
    out.append(s.fmt("They decided to " + inside + " inside."))
    out.append(s.fmt("It was so much fun that {name} forgot about the rain."))
    out.append(s.fmt("Soon the rain stopped, and the sun came out. There was a big rainbow!"))
    out.append(s.say(h, s.pick("Look, a rainbow!", "Wow! It is so pretty!")))
    return out, (
        "you can have fun on any day",
        "bad days can become good days",
        "it is good to find something fun to do",
    )


def _ep_new_friend(s: _Story, lead: str) -> tuple[list[str], tuple[str, ...]]:
    h, f = s.hero, s.friend
    s.friend_known = True
    out = [s.fmt("{name} did not have any friends, and {he} felt {sad}.")]
    out.append(s.fmt(lead + ", {name} went to {place} with {his} {oadj} {obj}."))
    out.append(s.fmt("There {he} saw " + _a(f.kind) + " sitting alone. It was {fname}."))
    out.append(
        s.fmt(
            s.pick("{fname} looked {sad} too.", "{fname} was new in town.", "{fname} did not have anyone to play with.")
        )
    )
    out.append(s.fmt("{name} wanted to say hello, but {he} was shy."))
    out.append(s.fmt("Then {he} took a deep breath and walked over."))
    out.append(
        s.say(
            h,
            s.pick(
                f"Hello! My name is {h.name}. Do you want to play?", f"Hi! Do you want to {s.overb} my {s.obj} with me?"
            ),
        )
    )
    out.append(s.say(f, s.pick(f"Yes! I am {f.name}.", "I would love to!")))
    out.append(s.fmt("They played with the {obj} all day long."))
    out.append(s.say(f, s.pick("Can we play again tomorrow?", "You are my best friend!")))
    out.append(s.fmt("From then on, {name} and {fname} were best friends."))
    return out, ("saying hello can make a new friend", "it is good to be brave and kind", "everyone needs a friend")


def _ep_race(s: _Story, lead: str) -> tuple[list[str], tuple[str, ...]]:
    h, f = s.hero, s.friend
    out = s.friend_intro()
    out.append(s.fmt(lead + ", {name} and {fname} had a race to the big tree in {place}."))
    out.append(s.say(f, s.pick("I am faster than you!", "I will win!", "Ready, set, go!")))
    out.append(s.fmt("{fname} ran very fast. {name} " + h.move + " as fast as {he} could."))
    if s.chance(0.5):
        out.append(s.fmt("But {fname} stopped to look at {detail} on the way."))
        out.append(s.fmt("{name} kept going and won the race!"))
        out.append(s.fmt('{fname} was {sad}, so {name} said, "You ran very well. Let\'s race again."'))
    else:
        out.append(s.fmt("{fname} won the race, and {name} felt {sad}."))
        out.append(s.say(f, s.pick("Good race! You were fast too.", "It was fun to race with you!")))
        out.append(s.fmt("{name} smiled. Winning was not so important."))
    out.append(s.fmt("Then they sat under the tree and shared " + _a(s.foodadj + " " + s.food) + "."))
    return out, (
        "having fun is more important than winning",
        "you should always be a good friend",
        "slow and steady can win the race",
    )


def _ep_pet(s: _Story, lead: str) -> tuple[list[str], tuple[str, ...]]:
    if s.pet is None:
        s.pet = s.rng.choice(PETS)
        out = [s.fmt("{name} had a pet {petkind} named {pet}.")]
    else:
        out = []
    out.append(s.fmt(lead + ", {name} took {pet} to {place}."))
    out.append(
        s.fmt(
            s.pick(
                "{pet} saw {detail} and ran off!",
                "{pet} ran after a butterfly and did not come back.",
                "When {name} looked up, {pet} was gone.",
            )
        )
    )
    out.append(s.fmt("{name} was very {sad}."))
    out.append(s.say(s.hero, s.pick(f"{s.pet[1]}! Where are you?", f"Come back, {s.pet[1]}!")))
    out.append(
        s.fmt(
            s.pick(
                "{name} looked near {detail}.",
                "{name} looked behind every tree.",
                "{name} asked everyone in {place} for help.",
            )
        )
    )
    out.append(s.fmt(s.pick("Then {he} heard a little noise.", "At last, {he} saw something move.")))
    out.append(
        s.fmt("It was {pet}! The {petkind} was playing with " + s.pick("a stick", "a leaf", "a ball", "a bug") + ".")
    )
    out.append(s.fmt("{name} picked up {pet} and gave the {petkind} a big hug."))
    out.append(s.say(s.hero, s.pick("I am so happy I found you!", "Please do not run away again!")))
    return out, (
        "you should always look after your pet",
        "love helps you find what you lost",
        "it is good to never give up",
    )


def _ep_gift(s: _Story, lead: str) -> tuple[list[str], tuple[str, ...]]:
    out = [s.fmt(lead + ", it was {name}'s {family}'s birthday.")]
    out.append(s.fmt("{name} wanted to give {his} {family} a special gift."))
    out.append(s.fmt(s.pick("But {he} had no money to buy one.", "But {he} did not know what to give.")))
    out.append(s.fmt("{He} thought and thought."))
    gift = s.pick(
        "a picture of {place}", "a card with a big heart", "a song", "a necklace made of flowers", "a little {food}"
    )
    out.append(s.fmt("Then {he} had an idea! {He} would make " + gift + "."))
    out.append(s.fmt("{He} worked very hard all afternoon."))
    out.append(s.fmt("When {his} {family} saw the gift, {famhe} was very surprised."))
    out.append(s.say(s.hero, s.pick("Happy birthday! I made it for you.", "This is for you!")))
    out.append(s.fmt("{His} {family} gave {name} a big hug. It was the best gift of all."))
    return out, (
        "gifts from the heart are the best",
        "love is more important than money",
        "making someone happy makes you happy too",
    )


def _ep_discovery(s: _Story, lead: str) -> tuple[list[str], tuple[str, ...]]:
    box = s.pick("an old box", "a small door", "a shiny egg", "a big bag", "a strange hole")
    inside = s.pick(
        "many pretty shells", "a tiny kitten", "a map of {place}", "old toys", "a little bird", "a golden key"
    )
    out = [s.fmt(lead + ", {name} was playing {prep} {place} when {he} found " + box + ".")]
    out.append(s.fmt("{name} was very curious. What was inside?"))
    out.append(s.say(s.hero, s.pick("I wonder what is in there.", "Should I open it?", "What can it be?")))
    out.append(
        s.fmt(
            s.pick(
                "{He} opened it slowly.",
                "{He} looked inside carefully.",
                "{He} called {his} {family} before {he} opened it.",
            )
        )
    )
    out.append(s.fmt("Inside, there was " + inside + "!"))
    out.append(s.fmt("{name} was so {happy}. {He} ran home to show {his} {family}."))
    if s.chance(0.5):
        out.append(s.fmt("Then {he} shared it with " + s.meet_friend() + "."))
    return out, ("the world is full of surprises", "being curious is fun", "it is good to share what you find")


# (episode, can be second in a story)
EPISODES: tuple[tuple[Callable[[_Story, str], tuple[list[str], tuple[str, ...]]], bool], ...] = (
    (_ep_lost_object, True),
    (_ep_sharing, True),
    (_ep_fear, True),
    (_ep_helping, True),
    (_ep_disobey, True),
    (_ep_make, True),
    (_ep_weather, True),
    (_ep_new_friend, False),
    (_ep_race, True),
    (_ep_pet, True),
    (_ep_gift, True),
    (_ep_discovery, True),
)
_SECOND = tuple(e for e, ok in EPISODES if ok)


def _one_story(rng: random.Random) -> str:
    s = _Story(rng)
    first = rng.choice(EPISODES)[0]
    episodes = [first]
    if rng.random() < 0.4:
        second = rng.choice(_SECOND)
        while second is first:
            second = rng.choice(_SECOND)
        episodes.append(second)
    sentences = s.opening(friend=first is not _ep_new_friend and rng.random() < 0.4)
    lessons: tuple[str, ...] = ()
    for i, ep in enumerate(episodes):
        lead = rng.choice(TIMES) if i == 0 else rng.choice(TRANSITIONS)
        body, lessons = ep(s, lead)
        sentences += body
    sentences += s.moral(rng.choice(lessons))
    sentences = [_cap(x) for x in sentences]
    # paragraphs at sentence boundaries, as TinyStories has
    if rng.random() < 0.5 and len(sentences) >= 6:
        cuts = sorted(rng.sample(range(2, len(sentences) - 1), k=rng.choice((1, 2))))
        bounds = [0] + cuts + [len(sentences)]
        return "\n\n".join(" ".join(sentences[a:b]) for a, b in zip(bounds, bounds[1:]))
    return " ".join(sentences)


def generate_stories(n: int, seed: int) -> list[str]:
    """Return ``n`` generated stories, a pure function of ``(n, seed)``.

    Story ``i`` does not depend on ``n``: ``generate_stories(m, s)[:k] == generate_stories(k, s)``.
    """
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    rng = random.Random(seed)
    return [_one_story(rng) for _ in range(n)]


def write_story_jsonl(path: str | os.PathLike, n: int, seed: int) -> None:
    """Write ``generate_stories(n, seed)`` to ``path``, one ``{"text": ...}`` JSON object a line."""
    with open(path, "w", encoding="utf-8") as fh:
        for text in generate_stories(n, seed):
            fh.write(json.dumps({"text": text}, ensure_ascii=False))
            fh.write("\n")
