"""A hobby-forum corpus where a few people write most of the posts: the repetition a user's corpus has.

One fictional community forum ("Thornbury Growers' Forum": allotments,
seeds, tools, swaps) exported as one record per post. What it exercises
that PrivLeak's clinical generator never does:

* **people with 1 to 200 records each**: post counts follow a heavy tail:
  the most active member writes ``min(200, 30 %)`` of the posts, a handful of
  regulars a few dozen each, and most members one to three, so a
  person-level figure under record-level DP is a group of up to 200;
* **near duplicates**: regulars post a weekly plot diary from one template
  (a few numbers and words change), cross-post the same text to two boards
  with a different header, and bump their own threads;
* **long free text**: posts of several paragraphs (up to ~2,500 characters),
  quoting the post they answer;
* PII in the text, with exact spans: the author's signature (name, town,
  sometimes a phone number or an e-mail address), other members named in
  replies, a pick-up address in swap posts, dates;
* **no canaries**: nothing planted, nothing of PrivLeak's.

Each record: ``text``, ``pii`` (Presidio labels, as :mod:`tests.corpora.pii`)
and ``meta = {"author", "thread", "board", "kind", "seed"}``; ``kind`` is
``post``, ``reply``, ``diary`` (the weekly near duplicates), ``crosspost`` or
``bump``. :func:`write_forum_corpus` writes ``author`` as a top-level JSONL
field so ``--group-field author`` can use it. Deterministic in ``seed``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from . import formats as F
from .formats import Rng
from .people import COUNTRY, World
from .render import Seg, lit, make_record, quote, write_jsonl

_LOCALES = ("en_GB", "en_GB", "en_GB", "en_AU", "nl_NL", "de_DE")
_BOARDS = ["Allotment diaries", "Seeds & swaps", "Pests and diseases", "Tools and sheds", "Soil and compost",
           "Fruit cages", "Greenhouse corner", "Off topic"]
_CROPS = ["runner beans", "broad beans", "garlic", "onion sets", "courgettes", "leeks", "parsnips", "beetroot",
          "kale", "rhubarb", "strawberries", "sweet peas", "tomatoes", "chard", "shallots", "purple sprouting"]
_PESTS = ["slugs", "blackfly", "carrot fly", "cabbage whites", "pigeons", "rust", "blight", "clubroot", "mice",
          "leatherjackets", "vine weevil", "powdery mildew"]
_TOOLS = ["a Spear & Jackson fork", "a rotavator", "two water butts", "a cold frame", "a wheelbarrow with a new tyre",
          "a box of terracotta pots", "an old greenhouse heater", "a hoe and a rake", "a compost bin", "netting"]
_OPENERS = [
    "Bit of a long one, sorry.", "Quick question for the old hands.", "Morning all.", "Evening everyone,",
    "Not sure this is the right board but here goes.", "Following on from last week's thread.",
    "Long-time lurker, first proper post.", "Right, update time.",
]
_BODY = [
    "The {crop} went in on the {day} after the rain finally stopped, about {n} to a row with a bit of blood, fish and bone raked in first.",
    "I have been fighting {pest} all month; the copper tape did nothing and the beer traps only got the small ones.",
    "The soil on the lower half of the plot is heavy clay and stays wet until May, so I dug in {n} barrows of well-rotted manure over the winter.",
    "Has anyone tried {crop} under fleece this early? The forecast says frost on {day} and I would rather not lose the lot again.",
    "Our committee has asked everyone to keep paths clear and to put {tool} away at night after the break-ins last month.",
    "The water troughs are back on from the first of the month, but please do not leave hoses running overnight.",
    "I sowed {crop} in modules in the greenhouse, {n} per cell, and pricked them out once the second leaves showed.",
    "Mulching with grass clippings kept the weeds down, though it did seem to bring the {pest} in.",
    "My neighbour on plot {plot} swears by comfrey tea; it smells terrible but the {crop} have never looked better.",
    "If anyone has spare {crop} seedlings I am happy to swap for {crop2} or a jar of last year's chutney.",
    "The rotation this year is legumes on bed {n}, brassicas after them, roots at the far end and potatoes by the shed.",
    "Netting went up over the {crop} after the {pest} had the first sowing down to stumps in two days.",
    "I measured the pH with one of those cheap kits and it came out at {ph}, which would explain a lot.",
    "Harvest so far: {n} kilos of {crop}, a bucket of {crop2} and more courgettes than anyone could want.",
]
_CLOSERS = ["Any advice welcome.", "Thanks in advance.", "Cheers.", "Happy growing!", "Pictures to follow.",
            "Will report back.", "Mind how you go."]
_REPLY_OPEN = ["Hi {name}, ", "{name} - ", "Thanks {name}. ", "Agree with {name} on this. ", ""]
_REPLY_BODY = [
    "We had the same with {pest} two years running; what finally worked was a collar of grit and going out with a torch at night.",
    "Clay is hard work but it holds the feed; keep adding organic matter and in three years you will not recognise it.",
    "I would not put {crop} out until the middle of May round here, fleece or no fleece.",
    "There is a seed swap at the community hall on the {day}; bring anything you have spare.",
    "Sounds like {pest} to me. Pull the worst ones and burn them, do not compost them.",
]


def _signature(rng: Rng, name: str, town: str, phone: str, email: str) -> list[Seg]:
    segs: list[Seg] = [lit("\n\n-- \n"), (name, "PERSON"), lit(", plot holder, "), (town, "LOCATION")]
    if rng.chance(0.3):
        segs += [lit("\nText me on "), (phone, "PHONE_NUMBER"), lit(" if the gate is locked")]
    if rng.chance(0.25):
        segs += [lit("\nOr e-mail "), (email, "EMAIL_ADDRESS")]
    return segs


def _fill(rng: Rng, text: str) -> str:
    return text.format(crop=rng.pick(_CROPS), crop2=rng.pick(_CROPS), pest=rng.pick(_PESTS), tool=rng.pick(_TOOLS),
                       n=rng.int(2, 30), plot=f"{rng.int(1, 60)}{rng.pick(['', 'a', 'b'])}", ph=f"{rng.int(55, 80) / 10:.1f}",
                       day=rng.pick(["Saturday", "Sunday", "bank holiday Monday", "Wednesday"]))


def _paragraphs(rng: Rng, bank: list[str], lo: int, hi: int) -> str:
    paras = []
    for _ in range(rng.int(lo, hi)):
        paras.append(" ".join(_fill(rng, rng.pick(bank)) for _ in range(rng.int(2, 4))))
    return "\n\n".join(paras)


def _post_counts(rng: Rng, n: int, max_posts: int, top_share: float, regular_share: float) -> list[int]:
    """Posts per member, summing to ``n``: the top poster writes min(max_posts, top_share · n), the k-th
    regular about top / k^0.7 until the regulars hold ``regular_share`` of the posts (a few dozen each:
    several heavy posters, as a real forum has), and a long tail of members write one to three posts each."""
    top = max(1, min(max_posts, round(top_share * n)))
    counts = [top]
    k = 2
    while sum(counts) < regular_share * n:
        c = max(1, min(max_posts, round(top / k ** 0.7), n - sum(counts)))
        counts.append(c)
        k += 1
    left = n - sum(counts)
    while left > 0:
        c = min(left, rng.int(1, 3))
        counts.append(c)
        left -= c
    return counts


def build_forum_corpus(n: int = 1500, seed: int = 0, max_posts: int = 200, top_share: float = 0.3,
                       regular_share: float = 0.7) -> list[dict[str, Any]]:
    """``n`` forum posts (see the module docstring); deterministic in ``seed``. ``top_share``: the most
    active member's share of the posts (at most ``max_posts``); ``regular_share``: the share the heavy
    posters hold together (the rest: one to three posts a member)."""
    world = World(seed + 3000, locales=tuple(sorted(set(_LOCALES))))
    rng = Rng(f"forum-{seed}")
    members = []
    for i, count in enumerate(_post_counts(rng, n, max_posts, top_share, regular_share)):
        loc = rng.pick(_LOCALES)
        p = world.person(rng, loc)
        town = world.city(rng, loc)
        members.append({"id": f"u{i:04d}", "name": p.full, "first": p.first, "town": town, "phone": p.phone,
                        "email": p.email, "loc": loc, "posts": count})
    records: list[dict[str, Any]] = []
    previous: list[tuple[list[Seg], dict[str, Any]]] = []  # recent posts, for replies to quote
    for m in members:
        diary_plot = f"{rng.int(1, 60)}"
        own: list[list[Seg]] = []
        for j in range(m["posts"]):
            board = rng.pick(_BOARDS)
            thread = f"t{rng.int(0, 10 ** 6):06d}"
            meta = {"author": m["id"], "thread": thread, "board": board}
            roll = rng.r.random()
            sig = _signature(rng, m["name"], m["town"], m["phone"], m["email"])
            if own and roll < 0.08:  # a cross-post: the same text under another board's header
                body = rng.pick(own)
                segs = [lit(f"[{board}] (cross-posted)\n\n")] + body[1:]
                meta["kind"] = "crosspost"
            elif own and roll < 0.12:  # a bump: a one-liner over the quoted own post
                segs = [lit(f"[{board}]\n\n"), lit("Bump - anyone? Still looking for help with this.\n\n")]
                segs += quote([s for s in rng.pick(own)[1:] if "\n-- \n" not in s[0]][:6])
                segs += sig
                meta["kind"] = "bump"
            elif m["posts"] >= 8 and roll < 0.45:  # the weekly diary: one template, small changes (near duplicates)
                week = j + 1
                segs = [lit(f"[Allotment diaries]\n\nPlot {diary_plot} diary, week {week}. "),
                        lit(f"Weather: {rng.pick(['dry', 'wet', 'mixed', 'windy'])}, {rng.int(4, 24)} degrees. "
                            f"Watered {rng.int(0, 4)} times, picked {rng.int(0, 9)} kilos. "
                            "Jobs done: weeding the onion bed, tying in the beans, turning the compost. "
                            "Jobs next week: sow the next row of lettuce, net the brassicas, fix the shed door."),
                        lit("\n\nNotes: " + _fill(rng, rng.pick(_BODY)))] + sig
                meta["kind"] = "diary"
            elif previous and roll < 0.7:  # a reply quoting someone else's post, naming them
                qsegs, qmeta = rng.pick(previous[-40:])
                other = next((x for x in members if x["id"] == qmeta["author"]), None)
                opener = rng.pick(_REPLY_OPEN)
                segs = [lit(f"[{board}]\n\n")]
                if other is not None and "{name}" in opener:
                    pre, post = opener.split("{name}")
                    segs += [lit(pre), (other["first"], "PERSON"), lit(post)]
                else:
                    segs.append(lit(opener.replace("{name}", "").strip() + " " if opener else ""))
                segs.append(lit(_paragraphs(rng, _REPLY_BODY, 1, 3)))
                segs += [lit("\n\n")] + quote([s for s in qsegs[1:] if "\n-- \n" not in s[0]][:5]) + sig
                meta["thread"], meta["kind"] = qmeta["thread"], "reply"
            else:  # a new post: long free text, sometimes a swap with a pick-up address and a date
                segs = [lit(f"[{board}]\n\n{rng.pick(_OPENERS)} "), lit(_paragraphs(rng, _BODY, 2, 6))]
                if board == "Seeds & swaps" or rng.chance(0.1):
                    segs += [lit(f"\n\nFree to a good home: {rng.pick(_TOOLS)}. Collect from "),
                             (world.street(m["loc"]), "LOCATION"), lit(" any time after "),
                             (F.format_date(rng, F.random_date(rng, 2023, 2025), COUNTRY[m["loc"]]), "DATE_TIME"),
                             lit(".")]
                segs += [lit("\n\n" + rng.pick(_CLOSERS))] + sig
                meta["kind"] = "post"
            own.append(segs)
            previous.append((segs, meta))
            records.append(make_record(segs, meta))
    rng.shuffle(records)
    for r in records:
        r["meta"]["seed"] = seed
    return records


def write_forum_corpus(path: str | Path, n: int = 1500, seed: int = 0, **shape: Any) -> Path:
    """The corpus as JSONL, ``author`` also top-level (``privleak run --data PATH --group-field author``);
    ``shape``: :func:`build_forum_corpus`'s ``max_posts``, ``top_share``, ``regular_share``."""
    return write_jsonl(build_forum_corpus(n, seed, **shape), path, top_level=("author",))
