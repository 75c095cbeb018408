"""A corporate e-mail corpus as a user would bring it to ``privleak run --data``.

About 2,000 messages written by ~150 employees of four fictional companies
(each with its own locale, domain, office address and house habits):

* ``kind="message"`` / ``"reply"``: threads of 1-6 messages with headers
  (From, To, Date, Subject), greetings, bodies, personal signatures, and
  replies that quote the previous message (Gmail-style "On ... wrote:" or
  Outlook-style "-----Original Message-----" blocks).  Two of the companies
  append a fixed legal disclaimer to every message (long verbatim
  substrings shared by hundreds of records).
* ``kind="boilerplate"``: five messages repeated verbatim about 50 times
  each (an IT maintenance notice, a staff newsletter, an out-of-office
  auto-reply, a phishing warning, a legal-hold notice), the exact
  duplication that real mail exports are full of.
* ``kind="notification"``: near-duplicates, i.e. system notifications from
  one template with small edits and different values (room bookings,
  expense approvals, shared documents, parcels, password expiry).

Each record: ``text``, ``pii`` (same labels and conventions as
:mod:`tests.corpora.pii`; headers' RFC 5322 dates are DATE_TIME spans) and
``meta = {"author", "thread", "company", "kind", "position", "seed"}`` plus
``dup_group`` for boilerplate and notifications.  ``author`` is an employee
id such as ``"hlv-017"`` (service accounts: ``"hlv-it"`` ...).
:func:`write_email_corpus` also writes ``author`` as a top-level JSONL field
so ``--group-field author`` can use it.  Records are shuffled, as a mailbox
export would interleave them.

Note: this module is ``tests/corpora/email.py``; import it as
``tests.corpora.email`` (never put ``tests/corpora`` itself on ``sys.path``,
where it would shadow the standard library's ``email``).
"""

from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import formats as F
from .formats import Rng
from .people import COUNTRY, LOCALES, Person, World
from .pii import _Ctx, _render_relative
from .render import Seg, Template, lit, make_record, quote, write_jsonl

_ROOTS = ["Halvorsen", "Brightwater", "Quillfield", "Norwick", "Tessaly", "Corvane", "Marrowby", "Okeford",
          "Stonebridge", "Veldhoven", "Ashcombe", "Pellucid", "Larkspur", "Kilbride"]
_SECTORS = ["Logistics", "Analytics", "Biosystems", "Freight", "Instruments", "Engineering", "Consulting", "Materials"]
_FORMS = {"en_US": ("Inc.", ".com"), "en_GB": ("Ltd", ".co.uk"), "de_DE": ("GmbH", ".de"), "nl_NL": ("B.V.", ".nl"),
          "en_CA": ("Corp.", ".ca"), "fr_FR": ("SAS", ".fr"), "en_AU": ("Pty Ltd", ".com.au")}
_TZ = {"en_US": -300, "en_GB": 0, "de_DE": 60, "nl_NL": 60, "en_CA": -300, "fr_FR": 60, "en_AU": 600}
_TITLES = ["Account Manager", "Operations Lead", "Senior Analyst", "Project Manager", "Finance Officer",
           "HR Business Partner", "Software Engineer", "Procurement Specialist", "Head of Sales", "Legal Counsel",
           "Office Manager", "Data Scientist", "Customer Success Manager", "Logistics Coordinator", "CFO",
           "Marketing Manager", "IT Support Analyst", "Quality Engineer", "Executive Assistant", "Controller"]
_DEPTS = ["Sales", "Finance", "Operations", "HR", "IT", "Legal", "Marketing", "Engineering", "Procurement"]


@dataclass
class Employee:
    id: str
    person: Person
    title: str
    dept: str
    mobile: str | None
    signature: list[Seg] = field(default_factory=list)


@dataclass
class Company:
    code: str
    name: str
    domain: str
    locale: str
    address: str
    phone: str
    url: str
    disclaimer: list[Seg] | None
    staff: list[Employee] = field(default_factory=list)

    @property
    def country(self) -> str:
        return COUNTRY[self.locale]


def _companies(world: World, rng: Rng, n_employees: int) -> list[Company]:
    locales = ["en_US", "en_GB", "de_DE", "nl_NL", "en_CA", "fr_FR", "en_AU"]
    rng.shuffle(locales)
    roots = list(_ROOTS)
    rng.shuffle(roots)
    shares = [0.36, 0.27, 0.22, 0.15]
    out = []
    for i, loc in enumerate(locales[:4]):
        root, sector = roots[i], rng.pick(_SECTORS)
        form, tld = _FORMS[loc]
        name = f"{root} {sector} {form}"
        domain = f"{root.lower()}-{sector.lower()}{tld}"
        code = root[:3].lower()
        address = world.address(loc)
        co = Company(code, name, domain, loc, address, F.phone(rng, COUNTRY[loc]), f"https://www.{domain}", None)
        if i < 2:  # two of the four companies append a legal footer to everything
            co.disclaimer = [
                lit("\n\nCONFIDENTIALITY NOTICE: This e-mail and any attachments are confidential and may be "
                    "legally privileged. If you are not the intended recipient, please notify the sender and "
                    "delete it; any use, copying or disclosure is prohibited. "),
                (name, "ORGANIZATION"), lit((" " if name.endswith(".") else ". ") + "Registered office: "),
                (address, "LOCATION"),
                lit(f". Company number {rng.digits(8)}."),
            ]
        size = max(3, round(n_employees * shares[i]))
        taken: set[str] = set()
        for k in range(size):
            ploc = loc if rng.chance(0.75) else rng.pick(LOCALES)
            while True:
                first, last = world.name(rng, ploc)
                local = _mailbox(first, last)  # first.last: the company convention
                if local not in taken:
                    taken.add(local)
                    break
            p = Person(first, last, co.country, f"{local}@{domain}", F.phone(rng, co.country))
            emp = Employee(f"{code}-{k + 1:03d}", p, rng.pick(_TITLES), rng.pick(_DEPTS),
                           F.phone(rng, co.country) if rng.chance(0.5) else None)
            emp.signature = _signature(rng, emp, co)
            co.staff.append(emp)
        out.append(co)
    return out


def _signature(rng: Rng, e: Employee, co: Company) -> list[Seg]:
    p = e.person
    style = rng.int(0, 2)
    segs: list[Seg] = [lit("\n\n-- \n" if style == 0 else "\n\n"), (p.full, "PERSON"), lit(f"\n{e.title}, {e.dept}\n"),
                       (co.name, "ORGANIZATION")]
    if style != 2:
        segs += [lit("\n"), (co.address, "LOCATION")]
    segs += [lit("\nT: " if style != 1 else "\nDirect: "), (p.phone, "PHONE_NUMBER")]
    if e.mobile:
        segs += [lit(" | M: "), (e.mobile, "PHONE_NUMBER")]
    if style == 0:
        segs += [lit("\n"), (co.url, "URL")]
    return segs


# ------------------------------------------------------------------- topics
# Each topic: subject, opening bodies, reply bodies.  Slots as in pii.py,
# with p1 = sender, p2 = first recipient, p3 = someone else, plus {co}
# (the sender's company) and {client} (another organisation).

_TOPICS: list[tuple[str, list[str], list[str]]] = [
    ("Meeting with {client}",
     ["Can we meet the team from {client} on {date} at {time}? {p3} from their side will join.",
      "{client} asked to move the review to {date}. I suggested their office at {addr}; {p3.first} will confirm.",
      "I'd like to prep before we see {client}. Are you free at {time} on {date}?"],
     ["Works for me. I'll send the invite.", "Can we do {time} instead? I'm at the {city} site until then.",
      "{p3.first} can't make it, so let's keep it short.", "Fine by me, I'll bring the figures."]),
    ("Invoice {inv}",
     ["The invoice from {client} is still unpaid. Their accounts contact is {p3} ({p3.phone}).",
      "Please pay {inv} ({amt}) to {iban} by {date}; {client} chased twice.",
      "Attached is invoice {inv} for {amt}. Bank details: {iban}, account holder {client}."],
     ["Paid, remittance to follow.", "I've asked {p3.first} in Finance to release it.",
      "Which IBAN is current? I have {iban} on file.", "On hold until {client} sends a corrected PO."]),
    ("Trip to {city}",
     ["Flights are booked for {date}; the hotel is at {addr}.",
      "For the {city} trip, the client dinner is at {time}. {p3} will pick us up from the airport.",
      "Visa letter for {p3} is ready; the embassy wanted the date of birth ({p3.dob}) as well."],
     ["Great, thanks for sorting it.", "Can you add me to the booking? My mobile is {p1.phone}.",
      "I'll land a bit later, around {time}.", "Perfect. Is there a taxi account with {client}?"]),
    ("Welcome {p3.first}",
     ["{p3} starts on {date} in the {city} office. The laptop goes to {p3.addr}.",
      "Please set up accounts for {p3} ({p3.email}) before {date}.",
      "{p3.first} joins us from {client}; buddy will be {p2.first}."],
     ["Accounts done, temporary password sent by text to {p3.phone}.", "Desk is booked next to {p1.first}.",
      "Welcome pack is on the way.", "IT says the laptop ships {rel}."]),
    ("VPN issue",
     ["My laptop can't reach {ip} over the VPN; the portal at {url} times out.",
      "Since the update the VPN assigns {ip} and nothing internal resolves.",
      "Could you whitelist {ip} for the lab? Ticket {ref}."],
     ["Try reconnecting, we pushed a fix.", "Whitelisted. Let me know if {url} still fails.",
      "Can you send me the logs? Ticket {ref} is open.", "Works now, thanks."]),
    ("Contract review - {client}",
     ["Legal flagged clause {n}. {client} wants the liability cap raised to {amt}.",
      "Redline attached. {p3} at {client} needs it back by {date}.",
      "The notices clause still has their old address ({addr}); please fix before signature."],
     ["Agree with the redline.", "We can live with {amt} if the term stays at {dur}.",
      "I'll call {p3.first} on {p3.phone} to walk through it.", "Signed copy uploaded."]),
    ("Offsite planning",
     ["Venue is {addr}; the coach leaves at {time} on {date}.",
      "Dietary requirements so far: {n} vegetarian. {p3.first} is handling the dinner booking.",
      "Budget is {amt} all in. Can you check the room at {addr}?"],
     ["Count me in.", "I'll arrive separately from {city}.", "Can we start at {time} instead?",
      "Booked, confirmation attached."]),
    ("Candidate {p3}",
     ["{p3} ({p3.phone}, {p3.email}) is available for a second interview on {date}.",
      "Feedback on {p3}: strong on analysis, lives in {city} so hybrid is fine.",
      "Reference check for {p3} came back from {client}."],
     ["Let's make an offer.", "I can interview at {time}.", "Agree, strong hire.",
      "Can we wait until {p3.first} meets the team?"]),
    ("Card expense",
     ["I used the card {card} for the client dinner; receipt attached.",
      "The hotel charged {amt} twice on {card}. Can you dispute it?",
      "Expense report for {city} submitted, total {amt}."],
     ["Approved.", "Please split the alcohol out and resubmit.", "Disputed with the bank, ref {ref}.",
      "Noted, thanks."]),
    ("Personal matter",
     ["I'll be away from {date} to {date2} for a family matter; {p3.first} will cover.",
      "Quick heads-up: I have a medical appointment on {date} at {time}.",
      "My new address for payroll is {p1.addr}."],
     ["Of course, take the time you need.", "Thanks for letting me know.", "Updated in the HR system.",
      "Hope all is well."]),
    ("Lead: {client}",
     ["Spoke with {p3} at {client}; they're based in {city} and want a demo on {date}.",
      "{client} downloaded the whitepaper from {url}; contact is {p3.email}.",
      "Warm intro from {p3.first}: {client} is looking to switch suppliers."],
     ["I'll take the demo.", "Please log it in the CRM.", "Their office in {city} is close to ours.",
      "Sent a follow-up to {p3.email}."]),
    ("Draft report v{ver}",
     ["Attached is draft v{ver}; comments by {date} please.", "Draft v{ver} is on the shared drive.",
      "I reworked the summary in v{ver}. Section {n} still needs figures."],
     ["Looks good, minor comments inline.", "Section {n} needs more detail.", "Approved from my side.",
      "Can you add the appendix?"]),
]
_GREETINGS = ["Hi {p2.first},", "Hello {p2.first},", "Dear {p2.first},", "{p2.first},", "Hi all,", "Hi team,"]
_SIGNOFFS = ["Best,\n{p1.first}", "Thanks,\n{p1.first}", "Kind regards,\n{p1}", "Cheers,\n{p1.first}", "Regards,\n{p1.first}", "{p1.first}"]
_FILLER_LINES = ["Let me know if you have questions.", "Thanks in advance.", "Happy to discuss.",
                 "Sorry for the long email.", "See attached.", "Looping in the right people."]


class _MailCtx(_Ctx):
    """pii._Ctx with the thread's people fixed and company slots added."""

    def __init__(self, world: World, rng: Rng, co: Company, people: dict[str, Person], client: str) -> None:
        super().__init__(world, rng, co.locale)
        self.persons.update(people)
        self.co, self.client = co, client

    def _make(self, slot: str) -> tuple[str, str | None]:
        if slot == "co":
            return self.co.name, "ORGANIZATION"
        if slot == "client":
            return self.client, "ORGANIZATION"
        return super()._make(slot)


def _parsed(srcs: list[str]) -> list[Template]:
    return [Template(s) for s in srcs]


_T_TOPICS = [(Template(s), _parsed(o), _parsed(r)) for s, o, r in _TOPICS]
_T_GREET = _parsed(_GREETINGS)
_T_SIGNOFF = _parsed(_SIGNOFFS)


def _addr_seg(e: Employee, with_name: bool) -> list[Seg]:
    if with_name:
        return [(e.person.full, "PERSON"), lit(" <"), (e.person.email, "EMAIL_ADDRESS"), lit(">")]
    return [(e.person.email, "EMAIL_ADDRESS")]


def _header(rng: Rng, sender: Employee, to: list[Employee], when: _dt.datetime, co: Company,
            subject: list[Seg]) -> list[Seg]:
    with_names = rng.chance(0.7)
    segs: list[Seg] = [lit("From: ")] + _addr_seg(sender, True) + [lit("\nTo: ")]
    for i, e in enumerate(to):
        if i:
            segs.append(lit(", " if not with_names else "; "))
        segs += _addr_seg(e, with_names)
    segs += [lit("\nDate: "), (F.rfc5322_date(rng, when, _TZ[co.locale]), "DATE_TIME"), lit("\nSubject: ")]
    return segs + subject + [lit("\n\n")]


def _quote_header(rng: Rng, sender: Employee, when: _dt.datetime, to: list[Employee], subject: list[Seg]) -> list[Seg]:
    p = sender.person
    if rng.chance(0.5):  # Gmail style
        when_s = f"{F.WEEKDAYS_EN[when.weekday()][:3]}, {when.day} {F.MONTHS['en'][when.month - 1][:3]} {when.year} at {when.hour:02d}:{when.minute:02d}"
        return [lit("\n\nOn "), (when_s, "DATE_TIME"), lit(", "), (p.full, "PERSON"), lit(" <"),
                (p.email, "EMAIL_ADDRESS"), lit("> wrote:\n\n")]
    hour = when.hour % 12 or 12
    when_s = f"{F.WEEKDAYS_EN[when.weekday()]}, {F.MONTHS['en'][when.month - 1]} {when.day}, {when.year} {hour}:{when.minute:02d} {'AM' if when.hour < 12 else 'PM'}"
    segs: list[Seg] = [lit("\n\n-----Original Message-----\nFrom: "), (p.full, "PERSON"), lit("\nSent: "),
                       (when_s, "DATE_TIME"), lit("\nTo: ")]
    for i, e in enumerate(to):
        if i:
            segs.append(lit("; "))
        segs.append((e.person.full, "PERSON"))
    return segs + [lit("\nSubject: ")] + subject + [lit("\n\n")]


def _thread(rng: Rng, world: World, companies: list[Company], weights: dict[str, list[float]], tid: str,
            max_len: int) -> list[tuple[list[Seg], dict[str, Any]]]:
    co = rng.weighted(companies, [len(c.staff) for c in companies])
    starter = rng.weighted(co.staff, weights[co.code])
    others = [e for e in co.staff if e is not starter]
    k = rng.weighted([1, 2, 3, 4], [45, 30, 15, 10])
    participants = [starter] + [others[i] for i in _sample(rng, len(others), min(k, len(others)))]
    if rng.chance(0.2):  # cross-company thread
        other_co = rng.pick([c for c in companies if c is not co])
        participants.append(rng.pick(other_co.staff))
    outsider = world.person(rng, co.locale)
    client = rng.pick([c.name for c in companies if c is not co] + [world.company(co.locale) for _ in range(3)])
    subject_t, openers, replies = rng.pick(_T_TOPICS)
    length = min(max_len, rng.weighted([1, 2, 3, 4, 5, 6], [25, 25, 20, 14, 9, 7]))
    when = _dt.datetime.combine(F.random_date(rng, 2023, 2024), _dt.time(rng.int(7, 18), rng.int(0, 59), rng.int(0, 59)))
    subj_ctx = _MailCtx(world, rng, co, {"p3": outsider}, client)
    subject = subject_t.render(subj_ctx)
    records: list[dict[str, Any]] = []
    prev: tuple[Employee, list[Employee], _dt.datetime, list[Seg]] | None = None
    sender = starter
    last_body_t = None
    for pos in range(length):
        if pos:
            sender = rng.pick([e for e in participants if e is not prev[0]])
            when = when + _dt.timedelta(minutes=rng.int(4, 60 * 30))
        to = [e for e in participants if e is not sender] or [prev[0]]
        sender_co = next(c for c in companies if sender in c.staff)
        ctx = _MailCtx(world, rng, sender_co, {"p1": sender.person, "p2": to[0].person, "p3": outsider}, client)
        # The subject's slots ({client}, {p3}) already have values: share them.
        ctx.cache.update({k: v for k, v in subj_ctx.cache.items() if not k.startswith(("p1", "p2"))})
        # Never the same reply text twice in a row (nobody echoes the last message).
        choices = openers if pos == 0 else [t for t in replies if t is not last_body_t]
        body_t = rng.pick(choices)
        last_body_t = body_t
        body: list[Seg] = []
        greet = rng.pick(_T_GREET)
        if len(to) > 1 and "p2" in greet.source:
            greet = rng.pick(_T_GREET[-2:])
        body += greet.render(ctx) + [lit("\n\n")] + _render_relative(body_t, ctx)
        if rng.chance(0.3):
            body += [lit(" " + rng.pick(_FILLER_LINES))]
        body += [lit("\n\n")] + rng.pick(_T_SIGNOFF).render(ctx)
        if rng.chance(0.75):
            body += sender.signature
        if sender_co.disclaimer:
            body += sender_co.disclaimer
        subj = subject if pos == 0 else [lit("Re: ")] + subject
        segs = _header(rng, sender, to, when, sender_co, subj) + body
        if prev is not None and rng.chance(0.7):
            p_sender, p_to, p_when, p_body = prev
            segs += _quote_header(rng, p_sender, p_when, p_to, subject) + quote(p_body)
        meta = {"author": sender.id, "thread": tid, "company": sender_co.code,
                "kind": "message" if pos == 0 else "reply", "position": pos}
        records.append((segs, meta))
        prev = (sender, to, when, body)
    return records


def _mailbox(first: str, last: str) -> str:
    def clean(s: str) -> str:
        return "".join(ch for ch in F._ascii(s).lower() if ch.isalnum() or ch == "-").strip("-") or "x"
    return f"{clean(first)}.{clean(last)}"


def _sample(rng: Rng, n: int, k: int) -> list[int]:
    idx = list(range(n))
    rng.shuffle(idx)
    return idx[:k]


# -------------------------------------------------------------- boilerplate


def _boilerplates(rng: Rng, world: World, companies: list[Company]) -> list[tuple[list[Seg], dict[str, Any]]]:
    """Five messages, each fixed once and then repeated verbatim."""
    out = []
    a, b, c = companies[0], companies[1], companies[2]

    def when(co: Company) -> str:
        d = _dt.datetime.combine(F.random_date(rng, 2023, 2024), _dt.time(rng.int(6, 9), rng.int(0, 59), rng.int(0, 59)))
        return F.rfc5322_date(rng, d, _TZ[co.locale])

    it_contact = rng.pick(a.staff)
    segs = [lit("From: IT Service Desk <"), (f"servicedesk@{a.domain}", "EMAIL_ADDRESS"),
            lit(">\nTo: All Staff <"), (f"all-staff@{a.domain}", "EMAIL_ADDRESS"), lit(">\nDate: "), (when(a), "DATE_TIME"),
            lit("\nSubject: Planned maintenance of e-mail and VPN services\n\nDear colleagues,\n\nE-mail, VPN and the "
                "intranet will be unavailable during planned maintenance on "),
            (F.format_date(rng, F.random_date(rng, 2023, 2024), a.country), "DATE_TIME"), lit(" from "),
            ("22:00", "DATE_TIME"), lit(" to "), ("02:00", "DATE_TIME"),
            lit(". Please save your work and log off beforehand. Remote users should disconnect from the VPN gateway ("),
            (F.ipv4(rng), "IP_ADDRESS"), lit(").\n\nQuestions: contact "), (it_contact.person.full, "PERSON"), lit(" on "),
            (a.phone, "PHONE_NUMBER"), lit(" or raise a ticket at "), (f"https://helpdesk.{a.domain}/new", "URL"),
            lit(".\n\nIT Service Desk\n"), (a.name, "ORGANIZATION")]
    out.append((segs, {"author": f"{a.code}-it", "company": a.code, "dup_group": "it-maintenance"}))

    ceo, new1, new2 = rng.pick(b.staff), rng.pick(b.staff), rng.pick(b.staff)
    city = world.city(rng, b.locale)
    segs = [lit("From: Internal Communications <"), (f"news@{b.domain}", "EMAIL_ADDRESS"), lit(">\nDate: "), (when(b), "DATE_TIME"),
            lit("\nSubject: The Staff Bulletin\n\nTHE STAFF BULLETIN\n\nA word from the CEO\n"), (ceo.person.full, "PERSON"),
            lit(" thanks everyone for a strong finish and confirms that the new office in "), (city, "LOCATION"),
            lit(" opens on "), (F.format_date(rng, F.random_date(rng, 2024, 2025), b.country), "DATE_TIME"),
            lit(".\n\nWelcome to our new starters\n"), (new1.person.full, "PERSON"), lit(" ("), lit(new1.dept), lit(") and "),
            (new2.person.full, "PERSON"), lit(" ("), lit(new2.dept), lit(").\n\nSocial club\nThe staff party takes place at "),
            (world.address(b.locale), "LOCATION"), lit(". Tickets from the intranet: "), (f"https://intranet.{b.domain}/social", "URL"),
            lit(".\n\nYou are receiving this bulletin because you work at "), (b.name, "ORGANIZATION"), lit(".")]
    out.append((segs, {"author": f"{b.code}-comms", "company": b.code, "dup_group": "newsletter"}))

    away = rng.pick(a.staff)
    cover = rng.pick([e for e in a.staff if e is not away])
    segs = [lit("From: ")] + _addr_seg(away, True) + [
        lit("\nSubject: Automatic reply\n\nThank you for your message. I am out of the office until "),
        (F.format_date(rng, F.random_date(rng, 2023, 2024), a.country), "DATE_TIME"),
        lit(" with limited access to e-mail. For urgent matters please contact "), (cover.person.full, "PERSON"),
        lit(" ("), (cover.person.email, "EMAIL_ADDRESS"), lit(", "), (cover.person.phone, "PHONE_NUMBER"),
        lit(").\n\nBest regards,\n"), (away.person.full, "PERSON")]
    out.append((segs, {"author": away.id, "company": a.code, "dup_group": "out-of-office"}))

    sec = rng.pick(c.staff)
    segs = [lit("From: Information Security <"), (f"security@{c.domain}", "EMAIL_ADDRESS"), lit(">\nTo: All Staff\nDate: "),
            (when(c), "DATE_TIME"),
            lit("\nSubject: Warning: phishing e-mails impersonating our CFO\n\nWe are seeing e-mails that claim to come from "),
            ("cfo-office@" + c.domain.split(".")[0] + "-payments.com", "EMAIL_ADDRESS"),
            lit(" asking for urgent payments to IBAN "), (F.iban(rng, rng.pick(["PL", "PT", "IE"])), "IBAN_CODE"),
            lit(". Do not reply, do not pay, and report the message to "), (sec.person.full, "PERSON"),
            lit(" in Information Security ("), (sec.person.phone, "PHONE_NUMBER"), lit(").\n\n"), (c.name, "ORGANIZATION"),
            lit(" will never ask you to change bank details by e-mail.")]
    out.append((segs, {"author": f"{c.code}-security", "company": c.code, "dup_group": "phishing-warning"}))

    gc = rng.pick(b.staff)
    client = world.company(b.locale)
    segs = [lit("From: ")] + _addr_seg(gc, True) + [lit("\nDate: "), (when(b), "DATE_TIME"),
            lit("\nSubject: LEGAL HOLD NOTICE - privileged and confidential\n\nYou are receiving this notice because you may hold "
                "documents relevant to the dispute between "), (b.name, "ORGANIZATION"), lit(" and "), (client, "ORGANIZATION"),
            lit(". Effective immediately, do not delete, alter or discard any e-mails, files or notes created since "),
            (F.format_date(rng, F.random_date(rng, 2019, 2022), b.country), "DATE_TIME"),
            lit(" that relate to this matter. This hold overrides any retention schedule. Direct questions to "),
            (gc.person.full, "PERSON"), lit(", General Counsel, at "), (gc.person.phone, "PHONE_NUMBER"), lit(".")]
    out.append((segs, {"author": gc.id, "company": b.code, "dup_group": "legal-hold"}))
    return out


# ----------------------------------------------------------- notifications

_NOTIFICATIONS: list[tuple[str, str, list[str]]] = [
    ("room-booking", "rooms", [
        "Subject: Booking confirmed: Room {room}\n\nYour booking of room {room} on {date} from {time} to {time2} is confirmed.\nBooked by: {p1}",
        "Subject: Booking confirmed: Room {room}\n\nYour booking of room {room} on {date} from {time} to {time2} has been confirmed.\nBooked by: {p1}",
        "Subject: Booking confirmed - Room {room}\n\nYour booking of room {room} on {date}, {time} to {time2}, is confirmed.\nBooked by: {p1}"]),
    ("expense-approved", "expenses", [
        "Subject: Expense report approved\n\nExpense report EXP-{n} submitted by {p1} for {amt} has been approved by {p2}.",
        "Subject: Expense report approved\n\nExpense report EXP-{n} submitted by {p1} for {amt} was approved by {p2}.",
        "Subject: Expense report approved\n\nExpense report EXP-{n} ({amt}) submitted by {p1} has been approved by {p2}."]),
    ("doc-shared", "docs", [
        "Subject: {p1} shared a document with you\n\n{p1} shared \"{doc}\" with you.\nOpen: {docurl}",
        "Subject: {p1} shared a document with you\n\n{p1} has shared \"{doc}\" with you.\nOpen: {docurl}",
        "Subject: Document shared with you\n\n{p1} shared \"{doc}\" with you.\nOpen it here: {docurl}"]),
    ("parcel", "reception", [
        "Subject: Parcel for {p1}\n\nA parcel for {p1} has arrived at reception ({coaddr}). Please collect it.",
        "Subject: Parcel for {p1}\n\nA parcel for {p1} has arrived at reception ({coaddr}). Please collect it at your convenience.",
        "Subject: Parcel waiting\n\nA parcel for {p1} is waiting at reception ({coaddr}). Please collect it."]),
    ("password-expiry", "it", [
        "Subject: Your password expires soon\n\nDear {p1.first}, your network password expires on {date}. Change it at {pwurl}.",
        "Subject: Your password expires soon\n\nDear {p1.first},\nyour network password will expire on {date}. Change it at {pwurl}.",
        "Subject: Password expiry notice\n\nDear {p1.first}, your network password expires on {date}. Please change it at {pwurl}."]),
]
_DOCS = ["Budget planning", "Client list", "Board pack", "Team rota", "Onboarding checklist", "Sales pipeline",
         "Project plan", "Risk register", "Supplier scorecard", "Product roadmap"]
_T_NOTIF = [(g, sender, _parsed(v)) for g, sender, v in _NOTIFICATIONS]


class _NotifCtx(_MailCtx):
    def _make(self, slot: str) -> tuple[str, str | None]:
        r, co = self.r, self.co
        if slot == "doc":
            return r.pick(_DOCS), None
        if slot == "docurl":
            return f"https://docs.{co.domain}/d/{r.letters(4).lower()}{r.digits(6)}", "URL"
        if slot == "coaddr":
            return co.address, "LOCATION"
        if slot == "pwurl":
            return f"https://password.{co.domain}", "URL"
        return super()._make(slot)


def _notification(rng: Rng, world: World, companies: list[Company]) -> tuple[list[Seg], dict[str, Any]]:
    group, sender, variants = rng.pick(_T_NOTIF)
    co = rng.weighted(companies, [len(c.staff) for c in companies])
    p1, p2 = rng.pick(co.staff), rng.pick(co.staff)
    ctx = _NotifCtx(world, rng, co, {"p1": p1.person, "p2": p2.person}, "")
    # Mostly the first variant: many near-identical copies, a few small edits.
    tpl = variants[0] if rng.chance(0.6) else rng.pick(variants[1:])
    segs = [lit("From: "), (f"{sender}@{co.domain}", "EMAIL_ADDRESS"), lit("\nTo: ")] + _addr_seg(p1, False) + [lit("\n")] + tpl.render(ctx)
    return segs, {"author": f"{co.code}-{sender}", "company": co.code, "dup_group": group}


# -------------------------------------------------------------------- build


def build_email_corpus(n: int = 2000, seed: int = 0, n_employees: int = 150) -> list[dict[str, Any]]:
    """``n`` e-mail records (see the module docstring); deterministic in ``seed``."""
    world = World(seed + 1000)
    rng = Rng(f"email-{seed}")
    companies = _companies(world, rng, n_employees)
    # How often each employee writes: a few people send most of the mail.
    weights = {c.code: [1.0 / (1 + i) ** 0.8 for i in range(len(c.staff))] for c in companies}
    for c in companies:
        rng.shuffle(weights[c.code])

    records: list[dict[str, Any]] = []
    # ~50 copies of each boilerplate at n=2000 (scaled for other n).
    per = max(2, round(n * 0.025))
    for segs, meta in _boilerplates(rng, world, companies):
        copies = max(2, per + rng.int(-4, 4)) if n >= 400 else per
        rec = make_record(segs, {**meta, "thread": f"bp-{meta['dup_group']}", "kind": "boilerplate", "position": 0})
        for _ in range(copies):
            records.append({"text": rec["text"], "pii": [list(s) for s in rec["pii"]], "meta": dict(rec["meta"])})
    n_notif = round(n * 0.18)
    for _ in range(min(n_notif, max(0, n - len(records)))):
        segs, meta = _notification(rng, world, companies)
        records.append(make_record(segs, {**meta, "thread": f"notif-{meta['dup_group']}", "kind": "notification", "position": 0}))
    t = 0
    while len(records) < n:
        t += 1
        for segs, meta in _thread(rng, world, companies, weights, f"t{t:04d}", n - len(records)):
            records.append(make_record(segs, meta))
    records = records[:n]
    rng.shuffle(records)
    for r in records:
        r["meta"]["seed"] = seed
    return records


def write_email_corpus(path: str | Path, n: int = 2000, seed: int = 0) -> Path:
    return write_jsonl(build_email_corpus(n, seed), path, top_level=("author",))
