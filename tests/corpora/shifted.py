"""A deliberately distribution-shifted pair of corpora.

Two sources with unrelated generators and styles:

* **source A, ``style="legal_memo"``**: formal legal memoranda (en_US and
  en_GB).  A fixed header (TO / FROM / DATE / RE), numbered sections
  (QUESTION PRESENTED, SHORT ANSWER, DISCUSSION, RECOMMENDATION) and long
  sentences assembled from a formal grammar (Latinate vocabulary,
  subordinate clauses, citations of exhibits), 700-1,500 characters.
* **source B, ``style="forum_post"``**: casual forum posts (en_AU and
  en_CA) about flats, pets, cars and travel: a lower-case title, short
  first-person sentences, slang, typos, emoji, 80-500 characters.

Both carry PII spans with the labels and conventions of
:mod:`tests.corpora.pii`; ``meta`` holds ``source`` ("A"/"B"), ``style``,
``locale`` and ``seed``.

Intended use: a test takes source A as members and source B as
non-members and checks that a model-free classifier (character n-gram
statistics, lengths, punctuation rates ...) separates them, i.e. that the
audit's distribution-shift check would flag such a split.  The difference
is meant to be obvious; it is a positive control, not a subtle shift.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .formats import Rng
from .people import World
from .pii import _Ctx, _render_relative
from .render import Seg, casualize, lit, make_record, tpl, write_jsonl

# ---------------------------------------------------------------- source A

_MEMO_HEADER = tpl("MEMORANDUM\n\nTO: {p1}, {role1}\nFROM: {p2}, {role2}\nDATE: {date}\nRE: ")
_ROLES = ["Managing Partner", "Senior Associate", "General Counsel", "Head of Litigation", "Trainee Solicitor",
          "Of Counsel", "Compliance Director", "Associate"]
_MATTERS = ["{org} v. {org2}: enforceability of the limitation clause",
            "Proposed acquisition of {org}: regulatory exposure",
            "Dispute with {org} concerning the premises at {addr}",
            "Employment claim brought by {p3}",
            "Data protection complaint lodged by {p3}",
            "Termination of the distribution agreement with {org}"]
_QUESTION = ["Whether {org} may rely upon the exclusion clause notwithstanding the alleged misrepresentation by {p3}.",
             "Whether the notice served on {date2} was effective to terminate the agreement.",
             "Whether the Firm's client is liable for losses sustained at the premises at {addr}.",
             "Whether the dismissal of {p3} was procedurally fair having regard to the applicable code of practice."]
_SHORT = ["In all probability, yes, although the position is not free from doubt.",
          "Probably not, for the reasons set out below.",
          "It is likely that a court would so find, subject to the evidential matters identified in Part III.",
          "The answer turns principally upon the construction of clause {n}, which is, regrettably, ambiguous."]
_OPEN = ["Pursuant to the authorities considered above,", "Notwithstanding the foregoing,", "In light of the correspondence,",
         "Having regard to the contemporaneous documents,", "It is respectfully submitted that", "On balance,",
         "For the avoidance of doubt,", "It follows that"]
_SUBJ = ["the court", "the tribunal", "counsel for {org}", "the claimant", "the respondent", "{p3}",
         "the arbitrator", "opposing counsel"]
_VERB = ["would likely conclude", "has consistently maintained", "is unlikely to accept", "may reasonably infer",
         "would be entitled to find", "cannot credibly contend"]
_OBJ = ["that the clause is unenforceable as a penalty", "that the notice was defective in form",
        "that the duty of care was discharged", "that the representation was made recklessly",
        "that the contractual machinery was not engaged", "that the loss was too remote to be recoverable",
        "that the variation lacked consideration", "that the waiver was unequivocal"]
_TAIL = [", save insofar as the parties otherwise agreed.", ", having regard to the authorities cited above.", ".",
         ", albeit with some hesitation.", ", a conclusion which is reinforced by the letter of {p3} dated {date3}.",
         ", as the exhibit produced by {p3} of {city} demonstrates.", ", particularly given the conduct of {org}.",
         ", which accords with the e-mail from {p3.email}."]
_RECOMMEND = ["We recommend that the client write to {org} without delay, reserving all rights.",
              "We recommend that a without-prejudice approach be made to {p3}, whose direct line is {p3.phone}.",
              "We recommend obtaining counsel's opinion before any further step is taken.",
              "We recommend that the documents held at {addr} be preserved forthwith."]


def _memo(rng: Rng, ctx: _Ctx) -> list[Seg]:
    segs = _MEMO_HEADER.render(ctx) + tpl(rng.pick(_MATTERS)).render(ctx)
    segs += [lit("\n\nI. QUESTION PRESENTED\n\n")] + tpl(rng.pick(_QUESTION)).render(ctx)
    segs += [lit("\n\nII. SHORT ANSWER\n\n")] + tpl(rng.pick(_SHORT)).render(ctx)
    segs += [lit("\n\nIII. DISCUSSION\n\n")]
    # Draw sentence parts without replacement so no opener repeats in a memo.
    parts = [list(p) for p in (_OPEN, _SUBJ, _VERB, _OBJ, _TAIL)]
    for p in parts:
        rng.shuffle(p)
    for i in range(rng.int(3, 6)):
        o, s, v, ob, t = (p[i] for p in parts)
        segs += ([lit(" ")] if i else []) + tpl(f"{o} {s} {v} {ob}{t}").render(ctx)
    segs += [lit("\n\nIV. RECOMMENDATION\n\n")] + tpl(rng.pick(_RECOMMEND)).render(ctx)
    return segs


# ---------------------------------------------------------------- source B

_TITLES = ["landlord wont return my bond", "best vet near {city}??", "car making weird noise", "moving to {city} {rel} any tips",
           "noisy neighbours again", "lost my cat", "is this a scam", "job interview went badly lol",
           "cheap flights to {country}", "selling my old bike"]
_LINES = [
    "ok so my landlord {p1.first} says the carpet was already wrecked when i moved in",
    "anyone know a decent mechanic in {city}", "tbh im so over this", "ngl i cried a bit",
    "my mate {p2.first} reckons its the alternator", "she wants me to call {p1.phone} but nobody ever picks up",
    "we move into the new place {rel} so wish me luck", "pls help", "idk what to do anymore",
    "he sent me his email {p2.email} and asked for my bank details which feels dodgy",
    "the place is on {street} if anyone knows it", "cat is orange with a white paw, answers to biscuit",
    "text me on {phone} if u see her", "flying out to {country} {rel}", "hit me up at {p1.email} if keen",
    "cheers in advance", "update: sorted it!!", "honestly the vibes were off from the start",
    "asking for like half what i paid", "the interviewer {p2} didnt even look at my cv",
]


def _post(rng: Rng, ctx: _Ctx) -> list[Seg]:
    title = casualize(_render_relative(tpl(rng.pick(_TITLES)), ctx), rng, typo_rate=0.03, emoji_rate=0.0)
    lines = list(_LINES)
    rng.shuffle(lines)
    body: list[Seg] = []
    for i, line in enumerate(lines[: rng.int(1, 5)]):
        body += ([lit(rng.pick([" ", "\n", " ... "]))] if i else []) + _render_relative(tpl(line), ctx)
    body = casualize(body, rng, typo_rate=0.05, lower_names=0.6, emoji_rate=0.7, strip_punct=0.9)
    return [lit("title: ")] + title + [lit("\n\n")] + body


# ------------------------------------------------------------------- build


def build_shifted_corpus(n_per_source: int = 600, seed: int = 0) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """``(source_a, source_b)``, ``n_per_source`` records each (see the
    module docstring for what differs and how a test uses them)."""
    world = World(seed + 2000, locales=("en_US", "en_GB", "en_AU", "en_CA"))
    rng = Rng(f"shifted-{seed}")
    a, b = [], []
    for i in range(n_per_source):
        loc = ("en_US", "en_GB")[i % 2] if i < 2 else rng.pick(["en_US", "en_GB"])
        ctx = _MemoCtx(world, rng, loc)
        a.append(make_record(_memo(rng, ctx), {"source": "A", "style": "legal_memo", "locale": loc, "seed": seed}))
    for i in range(n_per_source):
        loc = ("en_AU", "en_CA")[i % 2] if i < 2 else rng.pick(["en_AU", "en_CA"])
        ctx = _Ctx(world, rng, loc)
        b.append(make_record(_post(rng, ctx), {"source": "B", "style": "forum_post", "locale": loc, "seed": seed}))
    return a, b


class _MemoCtx(_Ctx):
    def _make(self, slot: str) -> tuple[str, str | None]:
        if slot in ("role1", "role2"):
            return self.r.pick(_ROLES), None
        return super()._make(slot)


def write_shifted_corpus(path_a: str | Path, path_b: str | Path, n_per_source: int = 600, seed: int = 0) -> None:
    a, b = build_shifted_corpus(n_per_source, seed)
    write_jsonl(a, path_a)
    write_jsonl(b, path_b)
