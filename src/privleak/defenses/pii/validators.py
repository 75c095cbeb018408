"""Validators: checks that make a match a value of its type (checksums, numbering plans, domains)."""

from __future__ import annotations

from functools import lru_cache


def luhn_ok(value: str) -> bool:
    """The Luhn (mod 10) check digit of ISO/IEC 7812 card numbers."""
    digits = [int(ch) for ch in value if ch.isdigit()]
    if not 13 <= len(digits) <= 19:
        return False
    total = 0
    for i, d in enumerate(reversed(digits)):
        if i % 2:
            d *= 2
            if d > 9:
                d -= 9
        total += d
    return total % 10 == 0


@lru_cache(maxsize=1)
def offline_tld_extractor():  # -> tldextract.TLDExtract
    """A tldextract extractor that only ever uses its bundled suffix snapshot."""
    import tldextract

    return tldextract.TLDExtract(cache_dir=None, suffix_list_urls=(), fallback_to_snapshot=True)


# Regions whose national number formats Presidio's phone recognizer (Google's
# libphonenumber) accepts without a +country prefix: North America, the UK,
# Ireland, Australia and the large EU countries. Numbers with a + prefix are
# found for every region regardless.
_PHONE_REGIONS = ("US", "CA", "GB", "IE", "AU", "NZ", "DE", "AT", "CH", "FR", "BE", "NL", "ES", "IT", "PT")


def phone_score(cand: str) -> tuple[float, bool]:
    """(score, validated) of a phone-number candidate by Google's libphonenumber:
    0 when no region's numbering plan has the number."""
    import phonenumbers

    try:
        if cand.startswith(("+", "00")):
            # A "+" and a known country code are distinctive: a number of a
            # possible length for that country is kept (numbering plans
            # change faster than libphonenumber's validity tables).
            num = phonenumbers.parse("+" + cand[2:] if cand.startswith("00") else cand, None)
            return (0.7, True) if phonenumbers.is_possible_number(num) else (0.0, False)
        for region in _PHONE_REGIONS:
            num = phonenumbers.parse(cand, region)
            if phonenumbers.is_valid_number_for_region(num, region):
                grouped = not cand.isdigit() or cand.startswith("0")
                # Validated: an assigned North American range, or a national
                # number with its trunk 0. Other plans (Germany, Austria,
                # Italy) take almost any digit string, so a bare run of
                # digits valid only there needs a "phone" cue to count.
                strict = region in ("US", "CA") or cand.lstrip("(").startswith("0")
                return (0.5 if grouped else 0.4 if strict else 0.3), strict
    except phonenumbers.NumberParseException:
        return 0.0, False
    return 0.0, False
