"""The recognizers a :class:`~privleak.defenses.pii.PiiAnalyzer` runs, and which ones a label set needs.

* **Presidio's own recognizers** for e-mail (with an *offline*
  public-suffix check, :class:`OfflineEmailRecognizer`), US SSN, credit
  cards, IBAN, IP and MAC addresses, URLs, US bank account / passport / ITIN
  numbers, UK NHS and National Insurance numbers, DEA numbers
  (MEDICAL_LICENSE) and Bitcoin addresses (CRYPTO); the weak-pattern ones
  with cleaner context words. spaCy's NER through Presidio's
  ``SpacyRecognizer``.
* **PrivLeak's pattern recognizers** (:func:`.patterns.own_specs`), those
  with a checksum as :class:`ValidatingPatternRecognizer`, and deny-lists
  of user terms.
* **PrivLeak's list and phone recognizers**: :class:`PrivLeakPhoneRecognizer`
  (every country, libphonenumber), :class:`NameListRecognizer` and
  :class:`NrpListRecognizer`.

Presidio's e-mail recognizer validates the domain with ``tldextract``, whose
module-level extractor fetches the public-suffix list from the internet on
first use (and logs a warning when that fails); ours validates through
:func:`.validators.offline_tld_extractor`, the snapshot bundled inside the
tldextract wheel, so no socket is ever opened, no cache is written and
nothing global is patched.

Class names matter: Presidio's predefined-recognizer loader resolves
recognizer classes by name among all ``EntityRecognizer`` subclasses in the
process, so none of ours may share a name with one of Presidio's. This
module imports Presidio: :mod:`.analyzer` imports it only when an analyser
is built.
"""

from __future__ import annotations

import re
from typing import Callable, Mapping, Sequence

from presidio_analyzer import (
    AnalysisExplanation,
    EntityRecognizer,
    LocalRecognizer,
    Pattern,
    PatternRecognizer,
    RecognizerResult,
)
from presidio_analyzer.predefined_recognizers import (
    CreditCardRecognizer,
    CryptoRecognizer,
    EmailRecognizer,
    IbanRecognizer,
    IpRecognizer,
    MacAddressRecognizer,
    MedicalLicenseRecognizer,
    NhsRecognizer,
    SpacyRecognizer,
    UkNinoRecognizer,
    UrlRecognizer,
    UsBankRecognizer,
    UsItinRecognizer,
    UsPassportRecognizer,
    UsSsnRecognizer,
)

from .context import cue_distance
from .detection import NAME_LIST_SOURCE, NRP_LIST_SOURCE
from .labels import NER_ENTITIES
from .names import find_listed_names, load_name_lists
from .nrp import find_listed_groups
from .patterns import own_specs
from .validators import offline_tld_extractor, phone_score


def build_recognizers(labels: Sequence[str], terms: Mapping[str, Sequence[str]], ner: bool) -> list[EntityRecognizer]:
    """The recognizers ``labels`` need (PrivLeak labels): ours, in label order,
    with a deny-list per label in ``terms``, then Presidio's and the lists';
    spaCy's NER only when ``ner``."""
    recognizers: list[EntityRecognizer] = []
    specs = own_specs()
    for label in labels:
        spec = specs.get(label)
        if spec is not None:
            flags = re.DOTALL | re.MULTILINE | (0 if spec.case_sensitive else re.IGNORECASE)
            options = dict(
                supported_entity=label,
                name=f"privleak_{label.lower()}",
                patterns=[Pattern(n, rx, s) for n, rx, s in spec.patterns],
                context=list(spec.context) or None,
                global_regex_flags=flags,
            )
            recognizers.append(PatternRecognizer(**options) if spec.validate is None
                               else ValidatingPatternRecognizer(validator=spec.validate, **options))
        if terms.get(label):
            recognizers.append(PatternRecognizer(
                supported_entity=label, name=f"privleak_{label.lower()}_terms",
                deny_list=sorted(set(terms[label])), deny_list_score=0.9,
            ))
    return recognizers + _recognizer_classes(set(labels), ner)


def _recognizer_classes(wanted: set[str], ner: bool) -> list[EntityRecognizer]:
    """Recognizer classes, Presidio's and ours, for the ``wanted`` labels (no pattern table)."""
    out: list[EntityRecognizer] = []
    if ner:
        out.append(SpacyRecognizer(supported_entities=[e for lab, e in NER_ENTITIES.items() if lab in wanted]))
    # Recognizers that take no options.
    plain = {"NAME": NameListRecognizer, "NRP": NrpListRecognizer, "EMAIL": OfflineEmailRecognizer,
             "PHONE": PrivLeakPhoneRecognizer, "SSN": UsSsnRecognizer, "CREDIT_CARD": CreditCardRecognizer,
             "IBAN": IbanRecognizer, "IP_ADDRESS": IpRecognizer, "URL": UrlRecognizer,
             "MAC_ADDRESS": MacAddressRecognizer, "UK_NHS": NhsRecognizer, "UK_NINO": UkNinoRecognizer,
             "MEDICAL_LICENSE": MedicalLicenseRecognizer, "CRYPTO": CryptoRecognizer}
    out += [cls() for lab, cls in plain.items() if lab in wanted]
    # Presidio's weak-pattern recognizers score a bare number 0.01-0.1 and
    # rely on a context word to pass the threshold; context words match
    # as substrings, so their short ones fire on ordinary words ("us" in
    # "puedes", "tin" in "meeting", "save" in "saved"). Same patterns,
    # cleaner context. (US driver's licences: PrivLeak's own recognizer.)
    if "US_BANK_NUMBER" in wanted:
        out.append(UsBankRecognizer(context=["bank", "checking", "account", "acct", "debit", "deposit",
                                             "routing", "savings", "cheque", "chequing",
                                             "konto", "compte", "cuenta", "conto"]))
    if "US_PASSPORT" in wanted:
        out.append(UsPassportRecognizer(context=["passport", "travel document"]))
    if "US_ITIN" in wanted:
        out.append(UsItinRecognizer(context=["itin", "taxpayer", "tax id", "tax identification"]))
    return out


def _result(recognizer: EntityRecognizer, entity: str, start: int, end: int, score: float, explanation: str,
            **metadata) -> RecognizerResult:
    return RecognizerResult(
        entity, start, end, score,
        analysis_explanation=AnalysisExplanation(recognizer.name, score, textual_explanation=explanation),
        recognition_metadata={RecognizerResult.RECOGNIZER_NAME_KEY: recognizer.name,
                              RecognizerResult.RECOGNIZER_IDENTIFIER_KEY: recognizer.id, **metadata})


class ValidatingPatternRecognizer(PatternRecognizer):
    """A pattern recognizer whose matches must pass ``validator`` (a checksum)."""

    def __init__(self, *args, validator: Callable[[str], bool], **kwargs) -> None:
        self.validator = validator
        super().__init__(*args, **kwargs)

    def validate_result(self, pattern_text: str) -> bool:
        return bool(self.validator(pattern_text))


class OfflineEmailRecognizer(EmailRecognizer):
    """Presidio's e-mail recognizer, validating domains against the bundled PSL snapshot."""

    def validate_result(self, pattern_text: str) -> bool:
        return offline_tld_extractor()(pattern_text).fqdn != ""


# A run of 7-15 digits written as phone numbers are: optional +/00 and
# country code, groups separated by single spaces, dots, dashes or slashes,
# an area code in parentheses, a "(0)" trunk prefix.
_PHONE_CANDIDATE = re.compile(
    r"(?<![\w+@/.:#-])(?:\+|00)?\(?\d[\d().\-/ ]{5,22}\d(?![\w@])(?![.:/-]\d)"
)
_IPV4 = re.compile(r"\d{1,3}(?:\.\d{1,3}){3}")
_NUMERIC_DATE = re.compile(r"\d{1,2}([/.-])\d{1,2}\1\d{2}(?:\d{2})?|\d{4}([/.-])\d{1,2}\2\d{1,2}")


# Not named PhoneRecognizer: Presidio's predefined-recognizer loader finds classes by name among
# EntityRecognizer subclasses, and would build ours (wrong signature) once this module had run.
class PrivLeakPhoneRecognizer(LocalRecognizer):
    """Phone numbers of every country, validated by Google's libphonenumber.

    Presidio's ``PhoneRecognizer`` runs libphonenumber's matcher once per
    region over the whole text; here one regex finds the candidates and each
    is parsed (:func:`.validators.phone_score`): with a + or 00 prefix for
    its own country, otherwise for the regions in
    ``validators._PHONE_REGIONS`` (North America, UK, Ireland, Australia,
    New Zealand, the large EU countries). A number valid there (right length
    and prefixes) is kept: written with an international prefix, score 0.7;
    grouped or in national format (leading trunk 0), 0.5; a bare run of
    digits, 0.4 in North America and 0.3 elsewhere (below the default
    threshold: "Lot number 123456789" is no phone) — and a context word
    ("phone", "mobile") adds the usual 0.35.
    """

    # Matched as substrings of the words before a number (Presidio's
    # rule), so no short words: "tel" would match "hotel", "ring" "during".
    # "number" is not one: "account number", "passport number" and
    # "licence number" would all support a phone.
    CONTEXT = ["phone", "telephone", "cell", "mobile", "call", "fax", "contact", "whatsapp", "reach",
               "telefon", "téléphone", "portable", "teléfono", "móvil", "cellulare", "bellen",
               "rufen", "appel", "llama", "chiama"]

    def __init__(self) -> None:
        super().__init__(supported_entities=["PHONE_NUMBER"], name="privleak_intl_phone",
                         supported_language="en", context=self.CONTEXT)

    def load(self) -> None:
        pass

    def analyze(self, text, entities, nlp_artifacts=None):
        out = []
        for m in _PHONE_CANDIDATE.finditer(text):
            cand = m.group(0).rstrip(" -./(")
            start = m.start()
            while cand.count("(") < cand.count(")") and cand.endswith(")"):
                cand = cand[:-1]
            if cand.startswith("(") and ")" not in cand:
                cand, start = cand[1:], start + 1
            digits = sum(ch.isdigit() for ch in cand)
            if not 7 <= digits <= 15 or _IPV4.fullmatch(cand) or _NUMERIC_DATE.fullmatch(cand):
                continue
            score, validated = phone_score(cand)
            # Our own cue check, not Presidio's context boost: that one
            # skips stop words, and "call" is one.
            cued = score > 0 and cue_distance("PHONE", text, start) is not None
            if cued:
                score = min(1.0, score + 0.35)
            if score:
                out.append(_result(self, "PHONE_NUMBER", start, start + len(cand), score, "libphonenumber", **{
                    # libphonenumber knows the number range: as good as a checksum
                    "privleak_validated": validated,
                    RecognizerResult.IS_SCORE_ENHANCED_BY_CONTEXT_KEY: cued}))
        return out


class NameListRecognizer(LocalRecognizer):
    """Names found through lists of given names and surnames (:func:`.names.find_listed_names`).

    Its detections rank with the NER's (see :mod:`.overlaps`): a pattern (an
    address, an e-mail) always wins over them.
    """

    def __init__(self) -> None:
        super().__init__(supported_entities=["PERSON"], name=NAME_LIST_SOURCE, supported_language="en")

    def load(self) -> None:
        load_name_lists()  # when the analyser is built, not on its first text

    def analyze(self, text, entities, nlp_artifacts=None):
        return [_result(self, "PERSON", start, end, score, "given-name list")
                for start, end, score in find_listed_names(text)]


class NrpListRecognizer(LocalRecognizer):
    """Nationalities, religions and political affiliations from a fixed list
    (:func:`.nrp.find_listed_groups`), ranked with the NER."""

    def __init__(self) -> None:
        super().__init__(supported_entities=["NRP"], name=NRP_LIST_SOURCE, supported_language="en")

    def load(self) -> None:
        pass

    def analyze(self, text, entities, nlp_artifacts=None):
        return [_result(self, "NRP", start, end, score, "NRP list")
                for start, end, score in find_listed_groups(text)]
