"""A second foreign domain for utility tests: broadband support-chat transcripts.

The transcripts come from one fictional UK internet provider, "Kestrel
Fibre", and share a strong **house style** that a language model can learn
at the population level, independently of any one customer:

* a fixed header ``KESTREL FIBRE | CHAT TRANSCRIPT`` / ``Ref: KF-nnnnnn |
  Queue: ... | Channel: ...`` and a fixed wrap-up line ``WRAP: ... | FCR:
  Y/N | FAULT: <code> | NEXT: ...``;
* turns prefixed ``AGT <first name>:`` and ``CUST:``;
* scripted agent lines (greeting, the "DPA" identity check, closing), the
  same for every customer;
* shared jargon and abbreviations: DPA, acct, ONT, PON, LOS, CPE, SNR,
  FCR, DD, 5GHz, mesh discs, courier refs;
* nine issue types (no sync, slow speeds, billing, home move, dead router,
  payment details, static IP, contact update, cancellation), each with its
  own scripted troubleshooting path and fault code.

Customers are different people in every transcript: names from Faker
(mostly en_GB, also en_IE, pl_PL, en_IN, fr_FR, it_IT names, as in a UK
customer base), UK addresses and postcodes, UK phone numbers, dates of
birth, e-mail addresses, and in some issue types card numbers, GB IBANs and
IP addresses.  Spans use the labels and conventions of
:mod:`tests.corpora.pii`.

``build_domain_corpus(n=2000, n_public=1500, seed=0)`` returns
``(private, public)``.  The public set has the same house style and issue
mix but **different people**: no customer full name, e-mail address, phone
number, street address, card number, IBAN or IP address of the private set
occurs in it, and the agents are a disjoint set of staff.  It plays the role
of in-domain text a user may train on without privacy cost.  ``meta`` holds
``issue``, ``agent``, ``split`` ("private"/"public") and ``seed``.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from . import formats as F
from .formats import Rng
from .people import World
from .pii import _Ctx
from .render import Seg, casualize, lit, make_record, tpl, write_jsonl

_CUSTOMER_LOCALES = ("en_GB", "en_IE", "pl_PL", "en_IN", "fr_FR", "it_IT")
_CUSTOMER_WEIGHTS = (75, 6, 6, 7, 3, 3)
_AGENTS = ["Priya", "Tom", "Aisha", "Gareth", "Megan", "Callum", "Zainab", "Rhys", "Chloe", "Dev", "Ellie", "Kwame",
           "Hannah", "Marek", "Sophie", "Jamal", "Laura", "Owen", "Nadia", "Ben", "Fiona", "Ravi", "Katie", "Liam",
           "Amira", "Josh", "Rosie", "Tariq", "Holly", "Sean", "Yasmin", "Connor", "Leah", "Imran", "Beth", "Niall",
           "Ffion", "Dominic", "Shreya", "Alfie"]

_HEADER = "{KF} | CHAT TRANSCRIPT\nRef: KF-{ref} | Queue: {queue} | Channel: {channel}\n"
_GREET = ["Hi, you're through to {kf} support, {agent} speaking. How can I help?",
          "Hi there, thanks for contacting {kf}, you're chatting with {agent}. How can I help?"]
_DPA = ["Sorry to hear that. Before I look at the acct I need to run DPA. Can you confirm the full name, DOB and postcode on the acct?",
        "I can help with that. First I need to run DPA: full name, DOB and postcode on the acct please."]
_DPA_ANSWERS = ["{p1}, {p1.dob}, {postcode}", "{p1} {p1.dob} {postcode}", "its {p1}, dob {p1.dob}, postcode {postcode}",
                "{p1}\n{p1.dob}\n{postcode}", "{p1}, born {p1.dob}, {addr}"]
_DPA_OK = ["Thanks {p1.first}, DPA passed.", "Thank you {p1.first}, that's DPA done."]
_CLOSE = ["Anything else I can help with?", "Is there anything else I can do for you?"]
_BYE_CUST = ["no thats all thanks", "no thanks", "thats it cheers", "all good thanks"]
_BYE = ["Thanks for chatting with {kf}. Your ref is KF-{ref}. Take care!",
        "Thanks for your patience. Your ref for this chat is KF-{ref}. Take care!"]

# issue -> (queue, turns, wrap).  A turn is ("A" or "C", [variants]).
_ISSUES: dict[str, tuple[str, list[tuple[str, list[str]]], str]] = {
    "no_sync": ("Tech Support L1", [
        ("C", ["my internet has been down since {past}", "no internet at all, the light on the box is red",
               "broadband completely dead since {past}"]),
        ("A", ["I can see the ONT at {street} is reporting LOS. Can you check the lights on the ONT for me? PON should be solid green.",
               "Line test shows LOS on the ONT at {street}. What does the PON light on the ONT show?"]),
        ("C", ["PON is flashing red", "pon light is off", "the pon one is red"]),
        ("A", ["Thanks. Please power-cycle the ONT and the router: switch both off, then the ONT on first.",
               "OK, please power-cycle the ONT and router, ONT first."]),
        ("C", ["done, still red", "tried that, no change"]),
        ("A", ["That points to a fibre fault outside the property. I've booked an engineer visit for {date} between {t1} and {t2}. Please make sure an adult is home.",
               "Looks like a fault on the fibre outside. Engineer booked for {date}, {t1} to {t2}. An adult needs to be home."]),
    ], "ENGINEER BOOKED | FCR: N | FAULT: LOS-PON | NEXT: field visit"),
    "slow_speeds": ("Tech Support L1", [
        ("C", ["speeds are terrible, paying for 500 getting like 20", "internet is really slow", "speed test says 15mbps on a 900 plan"]),
        ("A", ["Sorry about that. Is the test over Wi-Fi or ethernet? Line stats show sync at full speed and the SNR margin is fine.",
               "Line stats look healthy: full sync, SNR margin OK. Was the test on Wi-Fi or ethernet?"]),
        ("C", ["wifi", "wifi from upstairs", "on my phone so wifi"]),
        ("A", ["Wi-Fi speeds vary a lot. Can you try a wired test at {url}? I can also change the router channel remotely.",
               "Could you run a wired test at {url}? Meanwhile I can move the router to a quieter channel."]),
        ("C", ["wired gives 480 so its the wifi then", "wired is fine yeah"]),
        ("A", ["Great, I've moved the 5GHz band to a less congested channel. Mesh discs are {amt} if coverage is still poor.",
               "I've changed the 5GHz channel remotely. If coverage upstairs is still weak, mesh discs are {amt}."]),
    ], "RESOLVED | FCR: Y | FAULT: WIFI-CONG | NEXT: none"),
    "billing": ("Billing", [
        ("C", ["why is my bill {amt}", "my bill went up to {amt}??", "been charged {amt}, thats wrong"]),
        ("A", ["Let me check. The bill dated {date} includes a one-off charge of {amt2} for the engineer visit on {date2}.",
               "I can see the bill dated {date} has a one-off engineer charge of {amt2} from the visit on {date2}."]),
        ("C", ["nobody told me about a charge", "the fault was on your side though"]),
        ("A", ["Apologies. As the fault was on our side I've applied a credit of {amt2}; it will show on the next bill.",
               "You're right, the fault was in our network. Credit of {amt2} applied to the acct."]),
    ], "CREDIT APPLIED | FCR: Y | FAULT: BILL-QUERY | NEXT: none"),
    "home_move": ("Moves", [
        ("C", ["moving house, need to take my broadband with me", "hi im moving, can i keep my broadband"]),
        ("A", ["No problem. What's the new address and the move date?", "Of course. Can I take the new address and move date?"]),
        ("C", ["{addr2}, moving on {date}", "its {addr2}. keys on {date}"]),
        ("A", ["Thanks. The new property is serviceable. ONT install booked for {date2}; service at {street} stops on {date3}.",
               "Good news, fibre is available there. Install booked for {date2} and the old line at {street} ceases {date3}."]),
    ], "HOME MOVE | FCR: Y | FAULT: n/a | NEXT: install"),
    "router": ("Tech Support L1", [
        ("C", ["router is dead, no lights at all", "router wont turn on", "hub died, smells burnt"]),
        ("A", ["Sorry about that. I'll send a replacement router. Is delivery to {street} OK?",
               "I'll get a replacement CPE out to you. Shall I send it to {street}?"]),
        ("C", ["yes thats fine", "no send it to my work, {addr2}", "yep"]),
        ("A", ["Done, courier ref {cref}. Please send the old router back in the prepaid bag.",
               "Replacement dispatched, courier ref {cref}. Old CPE goes back in the prepaid bag."]),
    ], "CPE SWAP | FCR: Y | FAULT: CPE-DOA | NEXT: courier"),
    "payment": ("Billing", [
        ("C", ["my card expired need to update it", "need to change the card on my acct", "can i pay by DD instead of card"]),
        ("A", ["Please don't type card numbers in chat. I'll send a secure payment link to {p1.email}.",
               "For security please don't post card details here; a secure link is on its way to {p1.email}."]),
        ("C", ["its {card} exp {exp}", "ok", "my iban is {iban} for the DD", "cool thanks"]),
        ("A", ["I've masked the payment details in our notes. The secure link has been sent to {p1.email}.",
               "Thanks, all updated. Confirmation goes to {p1.email}."]),
    ], "PAYMENT UPDATE | FCR: Y | FAULT: n/a | NEXT: none"),
    "static_ip": ("Tech Support L2", [
        ("C", ["i need a static ip for my home server", "can i get a fixed ip"]),
        ("A", ["Static IP is an add-on at {amt}. Shall I add it?", "We can do that: static IP is {amt}. Want me to add it?"]),
        ("C", ["yes please", "go on then"]),
        ("A", ["Done. Your static IP is {ip}; it goes live after a router reboot. Your IPv6 prefix is {ip6}/56.",
               "Added. Static IPv4 {ip}, IPv6 prefix {ip6}/56. Reboot the router to pick it up."]),
    ], "ADD-ON | FCR: Y | FAULT: n/a | NEXT: none"),
    "contact_update": ("Accounts", [
        ("C", ["can u update my mobile number and email", "new phone number and email pls"]),
        ("A", ["Sure, what are the new details?", "Of course, go ahead with the new details."]),
        ("C", ["{phone} and {newemail}", "mobile {phone}, email {newemail}", "{newemail}\n{phone}"]),
        ("A", ["Updated. You'll get a confirmation text on {phone}.", "All changed. A confirmation text is on its way to {phone}."]),
    ], "ACCT UPDATE | FCR: Y | FAULT: n/a | NEXT: none"),
    "cancellation": ("Retentions", [
        ("C", ["i want to cancel", "want to leave, moving in with my partner who has {org}", "cancel my broadband please"]),
        ("A", ["Sorry to see you go. I can offer {amt} off to stay with us?", "Before you go, I can take {amt} off your bill if you stay?"]),
        ("C", ["no thanks just cancel", "no"]),
        ("A", ["Understood. The contract ended on {date}, so no early termination fee. Service ends {date2}. Please return the router in the prepaid bag.",
               "Done. No ETC as the minimum term ended on {date}. Service stops on {date2}; router back in the prepaid bag please."]),
    ], "CEASE | FCR: Y | FAULT: n/a | NEXT: return CPE"),
}
_ISSUE_WEIGHTS = {"no_sync": 18, "slow_speeds": 16, "billing": 14, "home_move": 10, "router": 10, "payment": 10,
                  "static_ip": 6, "contact_update": 8, "cancellation": 8}
_PAST = ["yesterday", "last night", "this morning", "Sunday", "Friday evening"]


_PROVIDERS = ["gmail.com", "btinternet.com", "outlook.com", "yahoo.co.uk", "sky.com", "icloud.com"]


class _ChatCtx(_Ctx):
    def _make(self, slot: str) -> tuple[str, str | None]:
        r = self.r
        if slot == "past":
            return r.pick(_PAST), "DATE_TIME"
        if slot in ("amt", "amt2"):  # household-bill sized amounts
            return f"£{r.int(5, 60)}.{r.pick(['00', '50', '99', r.digits(2)])}", None
        if slot == "cref":
            return f"{r.letters(2)}{r.digits(9)}GB", None
        if slot == "ip6":
            # A delegated /56 prefix, written as "2a02:1b4:7c00::".
            return f"2a0{r.int(0, 9)}:{r.int(0x100, 0xffff):x}:{r.int(0x100, 0xffff):x}:{r.int(0, 0xff):x}00::", "IP_ADDRESS"
        if slot == "newemail":
            p = self.persons["p1"]
            return f"{F.email_local(p.first, p.last, r)}@{r.pick(_PROVIDERS)}", "EMAIL_ADDRESS"
        return super()._make(slot)


def _transcript(rng: Rng, world: World, agents: list[str], idx: int) -> tuple[list[Seg], dict[str, Any]]:
    loc = rng.weighted(_CUSTOMER_LOCALES, _CUSTOMER_WEIGHTS)
    ctx = _ChatCtx(world, rng, "en_GB")
    # The customer: a name from loc, but a UK address, phone and e-mail provider.
    first, last = world.name(rng, loc)
    person = world.person(rng, "en_GB")
    person.first, person.last = first, last
    person.email = f"{F.email_local(first, last, rng)}@{rng.pick(_PROVIDERS)}"
    ctx.persons["p1"] = person
    issue = rng.weighted(list(_ISSUE_WEIGHTS), list(_ISSUE_WEIGHTS.values()))
    queue, turns, wrap = _ISSUES[issue]
    agent = rng.pick(agents)
    # Values fixed for the whole transcript.  The provider's name is an
    # ORGANIZATION and the agent's first name a PERSON, like any other.
    street, postcode = world.street("en_GB"), world.faker("en_GB").postcode()
    town = world.city(rng, "en_GB")
    morning = rng.chance(0.5)
    ctx.cache.update({
        "kf": ("Kestrel Fibre", "ORGANIZATION"), "KF": ("KESTREL FIBRE", "ORGANIZATION"),
        "agent": (agent, "PERSON"), "queue": (queue, None),
        "channel": (rng.pick(["Web chat", "App", "Web chat", "WhatsApp"]), None),
        "street": (street, "LOCATION"), "postcode": (postcode, "LOCATION"),
        "addr": (f"{street}, {town}, {postcode}", "LOCATION"), "ref": (rng.digits(6), None),
        "t1": ("08:00" if morning else "13:00", "DATE_TIME"), "t2": ("13:00" if morning else "18:00", "DATE_TIME"),
        "url": ("https://www.kestrelfibre.co.uk/speedtest", "URL"),
    })

    def agent_turn(text: str) -> list[Seg]:
        return [lit("\nAGT "), (agent, "PERSON"), lit(": ")] + tpl(text).render(ctx)

    def cust_turn(text: str) -> list[Seg]:
        segs = tpl(text).render(ctx)
        return [lit("\nCUST: ")] + casualize(segs, rng, typo_rate=0.03, lower_names=0.3, emoji_rate=0.15, strip_punct=0.5)

    segs: list[Seg] = tpl(_HEADER).render(ctx)
    segs += agent_turn(rng.pick(_GREET))
    segs += cust_turn(rng.pick(turns[0][1]))
    segs += agent_turn(rng.pick(_DPA))
    segs += cust_turn(rng.pick(_DPA_ANSWERS))
    segs += agent_turn(rng.pick(_DPA_OK))
    for who, variants in turns[1:]:
        segs += agent_turn(rng.pick(variants)) if who == "A" else cust_turn(rng.pick(variants))
    segs += agent_turn(rng.pick(_CLOSE)) + cust_turn(rng.pick(_BYE_CUST)) + agent_turn(rng.pick(_BYE))
    segs += [lit(f"\n\nWRAP: {wrap}")]
    return segs, {"issue": issue, "agent": agent}


def _build(rng: Rng, world: World, agents: list[str], n: int, split: str, seed: int) -> list[dict[str, Any]]:
    out = []
    for i in range(n):
        segs, meta = _transcript(rng, world, agents, i)
        out.append(make_record(segs, {**meta, "split": split, "seed": seed}))
    return out


def _words(text: str) -> list[str]:
    return re.findall(r"\w+", text.lower())


def mentions_any(text: str, names: dict[str, set[tuple[str, ...]]]) -> bool:
    """Whether ``text`` contains, as whole words (case-insensitive), one of the
    multi-word ``names`` (indexed by their first two words, see
    :func:`name_index`), e.g. a street called "Bernard Hill" when "Bernard
    Hill" is a private customer."""
    w = _words(text)
    for i in range(len(w) - 1):
        for name in names.get(w[i] + " " + w[i + 1], ()):
            if tuple(w[i : i + len(name)]) == name:
                return True
    return False


def name_index(full_names: set[str]) -> dict[str, set[tuple[str, ...]]]:
    index: dict[str, set[tuple[str, ...]]] = {}
    for v in full_names:
        w = tuple(_words(v))
        if len(w) > 1:
            index.setdefault(w[0] + " " + w[1], set()).add(w)
    return index


def _identifying_values(records: list[dict[str, Any]]) -> set[str]:
    keep = {"EMAIL_ADDRESS", "PHONE_NUMBER", "CREDIT_CARD", "IBAN_CODE", "IP_ADDRESS"}
    vals = set()
    for r in records:
        for s, e, lab in r["pii"]:
            v = r["text"][s:e]
            if lab in keep or (lab in ("PERSON", "LOCATION") and " " in v and len(v) > 6):
                vals.add(v.lower())
    return vals


def build_domain_corpus(n: int = 2000, n_public: int = 1500, seed: int = 0) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """``(private, public)`` support-chat transcripts (see the module docstring)."""
    world = World(seed + 3000, locales=_CUSTOMER_LOCALES)
    rng = Rng(f"domain-{seed}")
    agents = list(_AGENTS)
    rng.shuffle(agents)
    half = len(agents) // 2
    private = _build(rng, world, agents[:half], n, "private", seed)
    # Public set: same style, disjoint staff, and none of the private people.
    names = {r["text"][s:e] for r in private for s, e, lab in r["pii"] if lab == "PERSON"}
    world.exclude |= names
    private_names = name_index(names)
    taken = _identifying_values(private)
    public: list[dict[str, Any]] = []
    while len(public) < n_public:
        segs, meta = _transcript(rng, world, agents[half:], len(public))
        rec = make_record(segs, {**meta, "split": "public", "seed": seed})
        if _identifying_values([rec]) & taken or mentions_any(rec["text"], private_names):
            continue  # collided with a private value (rare): draw another transcript
        public.append(rec)
    return private, public


def write_domain_corpus(path_private: str | Path, path_public: str | Path, n: int = 2000, n_public: int = 1500,
                        seed: int = 0) -> None:
    private, public = build_domain_corpus(n, n_public, seed)
    write_jsonl(private, path_private)
    write_jsonl(public, path_public)
