"""People, places and organisations drawn from Faker, per locale.

Faker supplies names, street addresses, companies and cities in each
locale's own conventions (its address providers follow the national postal
formats: "Straße Nr, PLZ Ort" in Germany, the postcode on its own line in the
UK, "n°, rue ..., CP VILLE" in France ...).  Newlines inside Faker's
addresses are replaced by ", " so an address is a single-line LOCATION value.

Faker's date helpers are never used: they are relative to today and would
make the corpora change with the calendar.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from faker import Faker

from . import formats as F
from .formats import Rng

LOCALES: tuple[str, ...] = ("en_US", "en_GB", "en_AU", "en_CA", "de_DE", "fr_FR", "nl_NL", "es_ES", "it_IT")
COUNTRY = {"en_US": "US", "en_GB": "GB", "en_AU": "AU", "en_CA": "CA", "de_DE": "DE", "fr_FR": "FR",
           "nl_NL": "NL", "es_ES": "ES", "it_IT": "IT"}
LANG = {"en_US": "en", "en_GB": "en", "en_AU": "en", "en_CA": "en", "de_DE": "de", "fr_FR": "fr",
        "nl_NL": "nl", "es_ES": "es", "it_IT": "it"}

# Real cities (Faker's English-locale cities are invented, "South Jessica";
# real ones are what users write and what a NER model has seen).
REAL_CITIES = {
    "US": ["Chicago", "Houston", "Phoenix", "Seattle", "Denver", "Boston", "Atlanta", "Portland", "San Diego",
           "Austin", "Nashville", "Baltimore", "Milwaukee", "Albuquerque", "Tucson", "Sacramento", "Omaha",
           "Raleigh", "Cleveland", "Pittsburgh", "Detroit", "Minneapolis", "New Orleans", "Tampa"],
    "GB": ["Manchester", "Leeds", "Bristol", "Glasgow", "Edinburgh", "Cardiff", "Sheffield", "Nottingham",
           "Leicester", "Brighton", "Norwich", "York", "Southampton", "Belfast", "Aberdeen", "Coventry"],
    "AU": ["Sydney", "Melbourne", "Brisbane", "Perth", "Adelaide", "Hobart", "Canberra", "Darwin",
           "Geelong", "Newcastle", "Wollongong", "Cairns", "Townsville", "Ballarat"],
    "CA": ["Toronto", "Montreal", "Vancouver", "Calgary", "Edmonton", "Ottawa", "Winnipeg", "Halifax",
           "Victoria", "Saskatoon", "Regina", "Kelowna", "Hamilton", "Quebec City"],
    "DE": ["Berlin", "Hamburg", "München", "Köln", "Frankfurt am Main", "Stuttgart", "Düsseldorf",
           "Leipzig", "Dresden", "Hannover", "Nürnberg", "Bremen", "Freiburg", "Münster"],
    "FR": ["Paris", "Lyon", "Marseille", "Toulouse", "Nice", "Nantes", "Strasbourg", "Montpellier",
           "Bordeaux", "Lille", "Rennes", "Grenoble", "Dijon", "Angers"],
    "NL": ["Amsterdam", "Rotterdam", "Den Haag", "Utrecht", "Eindhoven", "Groningen", "Tilburg",
           "Almere", "Breda", "Nijmegen", "Haarlem", "Arnhem", "Leiden", "Maastricht"],
    "ES": ["Madrid", "Barcelona", "Valencia", "Sevilla", "Zaragoza", "Málaga", "Bilbao", "Alicante",
           "Córdoba", "Valladolid", "Vigo", "Granada", "Salamanca", "Pamplona"],
    "IT": ["Roma", "Milano", "Napoli", "Torino", "Palermo", "Genova", "Bologna", "Firenze", "Bari",
           "Verona", "Padova", "Trieste", "Parma", "Perugia"],
}
COUNTRY_NAMES = ["Germany", "France", "Spain", "Italy", "the Netherlands", "Belgium", "Portugal", "Ireland",
                 "Poland", "Sweden", "Norway", "Denmark", "Austria", "Switzerland", "Canada", "Mexico",
                 "Brazil", "Argentina", "Japan", "India", "Singapore", "Australia", "New Zealand",
                 "South Africa", "Kenya", "Nigeria", "Egypt", "Turkey", "Greece", "the United States",
                 "the United Kingdom", "Scotland", "Vietnam", "Thailand", "Chile", "Peru"]
HOME_COUNTRY_NAME = {"US": "the United States", "GB": "the United Kingdom", "AU": "Australia", "CA": "Canada",
                     "DE": "Germany", "FR": "France", "NL": "the Netherlands", "ES": "Spain", "IT": "Italy"}
NATIONALITIES = ["German", "French", "Spanish", "Italian", "Dutch", "Belgian", "Portuguese", "Irish", "Polish",
                 "Swedish", "Norwegian", "Danish", "Austrian", "Swiss", "Canadian", "Mexican", "Brazilian",
                 "Argentinian", "Japanese", "Indian", "Chinese", "Australian", "British", "American",
                 "Nigerian", "Kenyan", "Egyptian", "Turkish", "Greek", "Vietnamese", "Filipino", "Romanian",
                 "Ukrainian", "Pakistani", "Colombian", "Moroccan", "Scottish", "Welsh"]
RELIGIONS = ["Catholic", "Protestant", "Muslim", "Jewish", "Hindu", "Buddhist", "Sikh", "Orthodox Christian",
             "Evangelical", "Methodist", "Anglican", "Baptist", "Mormon", "Lutheran"]
POLITICAL = ["Democrat", "Republican", "Labour", "Conservative", "Liberal Democrat", "Green Party",
             "Social Democrat", "Libertarian", "Socialist", "Tory", "SNP", "Christian Democrat"]
EMAIL_PROVIDERS = {
    "US": ["gmail.com", "yahoo.com", "outlook.com", "icloud.com", "aol.com", "hotmail.com", "proton.me"],
    "GB": ["gmail.com", "btinternet.com", "outlook.com", "yahoo.co.uk", "sky.com", "hotmail.co.uk"],
    "AU": ["gmail.com", "bigpond.com", "outlook.com", "optusnet.com.au", "yahoo.com.au"],
    "CA": ["gmail.com", "rogers.com", "shaw.ca", "outlook.com", "sympatico.ca", "yahoo.ca"],
    "DE": ["gmx.de", "web.de", "t-online.de", "gmail.com", "posteo.de", "outlook.de"],
    "FR": ["orange.fr", "free.fr", "laposte.net", "gmail.com", "sfr.fr", "wanadoo.fr"],
    "NL": ["ziggo.nl", "kpnmail.nl", "gmail.com", "hotmail.nl", "xs4all.nl", "outlook.com"],
    "ES": ["gmail.com", "hotmail.es", "yahoo.es", "telefonica.net", "outlook.es"],
    "IT": ["libero.it", "gmail.com", "virgilio.it", "tiscali.it", "alice.it", "hotmail.it"],
}
IBAN_HOME = {"GB": ["GB", "GB", "IE"], "DE": ["DE", "DE", "DE", "AT", "CH"], "FR": ["FR", "FR", "BE"],
             "NL": ["NL", "NL", "BE"], "ES": ["ES", "ES", "PT"], "IT": ["IT"],
             "US": ["DE", "GB", "FR", "NL", "CH", "IE", "PL"], "AU": ["GB", "DE", "IE", "FR"],
             "CA": ["GB", "FR", "DE", "NL"]}


@dataclass
class Person:
    first: str
    last: str
    country: str
    email: str
    phone: str
    _extra: dict = field(default_factory=dict)

    @property
    def full(self) -> str:
        return f"{self.first} {self.last}"


def _name_pool(fk: Faker, attr: str, method: str, n: int) -> list[str]:
    """``n`` names drawn with Faker's own frequency weights, de-duplicated in
    draw order (deterministic).

    One ``random_elements`` call over the locale's name list is ~100x faster
    than ``n`` calls of ``first_name()`` (which rebuilds the weighted
    distribution every call).  Locales whose person provider keeps names
    elsewhere (e.g. pl_PL's gendered surnames) use the per-call path."""
    person = next((p for p in fk.providers if getattr(p, "__provider__", "") == "faker.providers.person"), None)
    names = getattr(person, attr, None)
    if names is not None and len(names) >= 20:
        drawn = fk.random_elements(names, length=n, use_weighting=True)
    else:
        drawn = [getattr(fk, method)() for _ in range(n)]
    return list(dict.fromkeys(drawn))


class World:
    """Seeded Faker instances and name pools for every locale.

    Names come from pools drawn once per locale (Faker's weighted name
    choice is slow for the English locales); everything else is drawn from
    Faker on demand.  ``exclude`` holds full names that must never be
    produced (used to keep a "public" corpus free of private people)."""

    def __init__(self, seed: int, locales: tuple[str, ...] = LOCALES, pool: int = 400) -> None:
        self.rng = Rng(f"world-{seed}")
        self.fakers: dict[str, Faker] = {}
        self.first_names: dict[str, list[str]] = {}
        self.last_names: dict[str, list[str]] = {}
        for loc in locales:
            fk = Faker(loc)
            fk.seed_instance(self.rng.seed())
            self.fakers[loc] = fk
            self.first_names[loc] = _name_pool(fk, "first_names", "first_name", pool)
            self.last_names[loc] = _name_pool(fk, "last_names", "last_name", pool)
        self.locales = tuple(locales)
        self.exclude: set[str] = set()

    def faker(self, loc: str) -> Faker:
        return self.fakers[loc]

    def name(self, rng: Rng, loc: str) -> tuple[str, str]:
        for _ in range(100):
            first, last = rng.pick(self.first_names[loc]), rng.pick(self.last_names[loc])
            if f"{first} {last}" not in self.exclude:
                return first, last
        raise RuntimeError("name pool exhausted")

    def person(self, rng: Rng, loc: str, email_domain: str | None = None) -> Person:
        first, last = self.name(rng, loc)
        country = COUNTRY[loc]
        domain = email_domain or rng.pick(EMAIL_PROVIDERS[country])
        return Person(first, last, country, f"{F.email_local(first, last, rng)}@{domain}", F.phone(rng, country))

    def address(self, loc: str) -> str:
        raw = self.fakers[loc].address()
        parts = [p.strip() for p in raw.replace("\r", "").split("\n") if p.strip()]
        return ", ".join(parts)

    def street(self, loc: str) -> str:
        return " ".join(self.fakers[loc].street_address().split())

    def city(self, rng: Rng, loc: str) -> str:
        country = COUNTRY[loc]
        if rng.chance(0.75):
            return rng.pick(REAL_CITIES[country])
        return self.fakers[loc].city()

    def company(self, loc: str) -> str:
        return " ".join(self.fakers[loc].company().split())
