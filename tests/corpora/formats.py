"""Surface formats of identifiers, with their check digits, for the foreign corpora.

Everything here was written from public format descriptions, not from any
recognizer: the point of these corpora is that nothing in them was shaped by
the detectors they will be used to test.  Each format below names where it
was looked up.

Payment and bank identifiers
----------------------------
* **IBAN** (ISO 13616; SWIFT "IBAN Registry"): two-letter country code, two
  check digits, then a fixed-length national BBAN.  BBAN layouts used here,
  as listed in the registry (n = digit, a = upper-case letter, c = either):
  DE 8n10n (22 chars), GB 4a6n8n (22), FR 5n5n11c2n (27), NL 4a10n (18),
  ES 4n4n2n10n (24), IT 1a5n5n12c (27), BE 3n7n2n (16), AT 5n11n (20),
  CH 5n12c (21), IE 4a6n8n (22), PT 4n4n11n2n (25), PL 8n16n (28).
  IBAN check digits are ISO 7064 MOD 97-10: move the first four characters
  to the end, replace letters by 10..35, and choose the check digits so the
  number is 1 mod 97 (Algorithm::CheckDigits::M97_002 manual; RosettaCode
  "IBAN").  The national check digits are computed for FR (the RIB key,
  97 - (89*bank + 15*branch + 3*account) mod 97), ES (the two "DC" digits,
  weights 1,2,4,8,5,10,9,7,3,6 mod 11) and BE (first ten digits mod 97,
  0 -> 97); the other BBANs are random digits/letters.  Written either in
  the registry's "print" form (groups of four, space separated) or the
  "electronic" form (unspaced).
* **Payment cards** (ISO/IEC 7812; IIN table of Wikipedia "Payment card
  number" as reproduced by iinbase.com and Vantiv's "Credit card number
  formats"): Visa 4 (16 digits), Mastercard 51-55 and 2221-2720 (16),
  American Express 34/37 (15), Discover 6011, 644-649, 65 (16), JCB
  3528-3589 (16), Diners Club International 36 (14).  The last digit is the
  Luhn (mod 10) check digit.  Printed as 4-4-4-4 (Amex 4-6-5, Diners 4-6-4)
  with spaces, dashes, or no separator.
* **US bank account numbers**: no national format; ACH accepts at most 17
  digits and 8-12 digits is most common (askbanking.com "US bank account
  number digits").  Generated as 8-17 random digits, 9-12 most of the time.

Government and health identifiers
---------------------------------
* **US SSN** (SSA POMS RM 10201.035 "Invalid SSNs"): AAA-GG-SSSS where the
  area is never 000, 666 or 9xx, the group never 00 and the serial never
  0000.  Written with dashes, spaces, or as nine bare digits.
* **US passport** (legalclarity.org "How many digits does a passport number
  have"): nine digits (older books) or one letter followed by eight digits
  (Next Generation Passport).
* **US driver licence** (NTSI "State Driver's License Formats" table): a
  per-state layout; those used are listed in ``_DL_FORMATS``.
* **UK NHS number** (NHS Data Dictionary, "NHS NUMBER"): ten digits, the
  tenth a modulus-11 check digit over weights 10..2 (11 -> 0, 10 -> number
  not issued); displayed 3-3-4 with spaces, dashes or none.
* **MEDICAL_LICENSE = DEA registration number** (the US DEA number, as
  described on the "DEA number" encyclopaedia page and takerx.com): two
  letters (registrant type A/B/F/G/M, then the initial of the registrant's
  surname) and seven digits, the seventh being the last digit of
  (d1 + d3 + d5) + 2 * (d2 + d4 + d6).

Network and crypto
------------------
* **IPv4**: dotted quad.  **IPv6**: RFC 4291 section 2.2 full form and the
  RFC 5952 canonical form (lower case, no leading zeros, the longest run of
  zero groups replaced by "::").
* **Bitcoin** (Mastering Bitcoin ch. 4 "Base58Check"; BIP-173): P2PKH
  (version byte 0x00, "1...") and P2SH (0x05, "3...") addresses are
  Base58Check of version + 20-byte hash + the first four bytes of
  SHA256(SHA256(version + hash)); native SegWit v0 addresses are Bech32 with
  human-readable part "bc" and the BIP-173 BCH checksum.  The 20-byte hashes
  are random bytes, so no address corresponds to a known key.

Telephone numbers (ITU-T E.164 / E.123 and the national plans)
--------------------------------------------------------------
Wikipedia "National conventions for writing telephone numbers" and
"Telephone numbers in Europe", Ofcom's numbering pages, ACMA's plan (via
sent.dm "Phone numbers in Australia"):
* US/CA (NANP): NPA-NXX-XXXX, N = 2-9; written (NPA) NXX-XXXX, NPA-NXX-XXXX,
  NPA.NXX.XXXX, bare ten digits, +1 NPA NXX XXXX, 1-NPA-NXX-XXXX.
* GB: mobiles 07xxx xxxxxx; London 020 xxxx xxxx; other areas 01xxx xxxxxx
  or 01x1 xxx xxxx; international +44 with the trunk 0 dropped, sometimes
  kept in parentheses "+44 (0)20 ...".
* AU: mobiles 04xx xxx xxx; landlines (0A) xxxx xxxx with A in 2/3/7/8;
  +61 drops the trunk 0.
* DE: mobiles 015x/016x/017x + 7-8 digits; area codes 030, 040, 089, 0221,
  069 ...; written "030 12345678", "030/12345678", "+49 30 12345678",
  "+49 (0)30 ...".
* FR: ten digits 0Z ZZ ZZ ZZ ZZ (Z=1-5 geographic, 6/7 mobile), written in
  pairs with spaces or dots, or +33 Z ZZ ZZ ZZ ZZ.
* NL: ten digits with the trunk 0; mobiles 06-xxxxxxxx; area codes 020,
  010, 070, 030 ...; "020-1234567", "(020) 123 4567", "+31 20 123 4567".
* ES: nine digits, no trunk prefix; mobiles 6xx/7xx, geographic 9x;
  "612 345 678", "91 123 45 67", "+34 612 34 56 78".
* IT: mobiles 3xx xxxxxxx; geographic numbers keep their leading 0 even
  after +39 (06 Rome, 02 Milan ...).

Dates follow each locale's usual order (US month/day/year; UK, AU, FR, ES,
IT day/month/year; DE day.month.year; NL day-month-year), plus ISO 8601 and
month names in the locale's language.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import random
import unicodedata

# ---------------------------------------------------------------- randomness


class Rng:
    """A seeded stream of choices.

    Built on :class:`random.Random` (Mersenne Twister): its output for a seed
    is stable across platforms and Python versions, and it is several times
    faster per call than numpy's scalar API, which matters for 3,000-record
    corpora made of many tiny choices.
    """

    def __init__(self, seed: int | str) -> None:
        self.r = random.Random(seed)

    def int(self, lo: int, hi: int) -> int:  # inclusive
        return self.r.randint(lo, hi)

    def pick(self, seq):
        return seq[self.r.randrange(len(seq))]

    def chance(self, p: float) -> bool:
        return self.r.random() < p

    def digits(self, n: int) -> str:
        return "".join(str(self.r.randrange(10)) for _ in range(n))

    def letters(self, n: int) -> str:
        return "".join(chr(65 + self.r.randrange(26)) for _ in range(n))

    def weighted(self, items, weights):
        return self.r.choices(items, weights=weights, k=1)[0]

    def shuffle(self, seq: list) -> None:
        self.r.shuffle(seq)

    def randbytes(self, n: int) -> bytes:
        return bytes(self.r.randrange(256) for _ in range(n))

    def seed(self) -> int:
        """A fresh integer seed (for Faker or a sub-stream)."""
        return self.r.randrange(2**31)


# ------------------------------------------------------------- check digits


def luhn_check_digit(body: str) -> str:
    total = 0
    # Double every second digit counting from the right of the full number,
    # i.e. starting with the rightmost digit of the body.
    for i, ch in enumerate(reversed(body)):
        d = int(ch)
        if i % 2 == 0:
            d *= 2
            if d > 9:
                d -= 9
        total += d
    return str((10 - total % 10) % 10)


def luhn_valid(number: str) -> bool:
    digits = "".join(ch for ch in number if ch.isdigit())
    return len(digits) >= 12 and luhn_check_digit(digits[:-1]) == digits[-1]


def _iban_numeric(s: str) -> int:
    return int("".join(str(int(ch, 36)) for ch in s))


def iban_valid(iban: str) -> bool:
    s = iban.replace(" ", "").upper()
    if len(s) < 15 or not s[:2].isalpha() or not s[2:4].isdigit():
        return False
    return _iban_numeric(s[4:] + s[:4]) % 97 == 1


def nhs_check_digit(first9: str) -> int | None:
    total = sum(int(d) * w for d, w in zip(first9, range(10, 1, -1)))
    check = 11 - total % 11
    if check == 11:
        return 0
    return None if check == 10 else check


def nhs_valid(number: str) -> bool:
    digits = "".join(ch for ch in number if ch.isdigit())
    return len(digits) == 10 and nhs_check_digit(digits[:9]) == int(digits[9])


def dea_valid(number: str) -> bool:
    if len(number) != 9 or not number[:2].isalpha() or not number[2:].isdigit():
        return False
    d = [int(c) for c in number[2:]]
    return (d[0] + d[2] + d[4] + 2 * (d[1] + d[3] + d[5])) % 10 == d[6]


_B58 = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"


def _sha256d(b: bytes) -> bytes:
    return hashlib.sha256(hashlib.sha256(b).digest()).digest()


def base58check(payload: bytes) -> str:
    raw = payload + _sha256d(payload)[:4]
    n = int.from_bytes(raw, "big")
    out = ""
    while n:
        n, r = divmod(n, 58)
        out = _B58[r] + out
    # Each leading zero byte is written as a leading "1".
    pad = len(raw) - len(raw.lstrip(b"\0"))
    return "1" * pad + out


def base58check_valid(addr: str) -> bool:
    n = 0
    for ch in addr:
        if ch not in _B58:
            return False
        n = n * 58 + _B58.index(ch)
    pad = len(addr) - len(addr.lstrip("1"))
    body = n.to_bytes((n.bit_length() + 7) // 8, "big") if n else b""
    raw = b"\0" * pad + body
    return len(raw) == 25 and _sha256d(raw[:-4])[:4] == raw[-4:]


_BECH32 = "qpzry9x8gf2tvdw0s3jn54khce6mua7l"
_BECH32_GEN = (0x3B6A57B2, 0x26508E6D, 0x1EA119FA, 0x3D4233DD, 0x2A1462B3)


def _bech32_polymod(values: list[int]) -> int:
    chk = 1
    for v in values:
        top = chk >> 25
        chk = ((chk & 0x1FFFFFF) << 5) ^ v
        for i in range(5):
            if (top >> i) & 1:
                chk ^= _BECH32_GEN[i]
    return chk


def _hrp_expand(hrp: str) -> list[int]:
    return [ord(c) >> 5 for c in hrp] + [0] + [ord(c) & 31 for c in hrp]


def _to5bits(data: bytes) -> list[int]:
    acc = bits = 0
    out = []
    for byte in data:
        acc = (acc << 8) | byte
        bits += 8
        while bits >= 5:
            bits -= 5
            out.append((acc >> bits) & 31)
    if bits:
        out.append((acc << (5 - bits)) & 31)
    return out


def bech32_segwit_v0(program: bytes, hrp: str = "bc") -> str:
    data = [0] + _to5bits(program)
    poly = _bech32_polymod(_hrp_expand(hrp) + data + [0] * 6) ^ 1
    check = [(poly >> 5 * (5 - i)) & 31 for i in range(6)]
    return hrp + "1" + "".join(_BECH32[d] for d in data + check)


def bech32_valid(addr: str) -> bool:
    hrp, _, data = addr.lower().rpartition("1")
    if not hrp or len(data) < 6 or any(c not in _BECH32 for c in data):
        return False
    return _bech32_polymod(_hrp_expand(hrp) + [_BECH32.index(c) for c in data]) == 1


def btc_valid(addr: str) -> bool:
    return bech32_valid(addr) if addr.lower().startswith("bc1") else base58check_valid(addr)


# ------------------------------------------------------------ bank formats

# country -> list of (kind, length) blocks of the BBAN; kind n/a/c as in the
# registry.
_BBAN = {
    "DE": [("n", 8), ("n", 10)],
    "GB": [("a", 4), ("n", 6), ("n", 8)],
    "FR": [("n", 5), ("n", 5), ("n", 11), ("n", 2)],
    "NL": [("a", 4), ("n", 10)],
    "ES": [("n", 4), ("n", 4), ("n", 2), ("n", 10)],
    "IT": [("a", 1), ("n", 5), ("n", 5), ("c", 12)],
    "BE": [("n", 3), ("n", 7), ("n", 2)],
    "AT": [("n", 5), ("n", 11)],
    "CH": [("n", 5), ("c", 12)],
    "IE": [("a", 4), ("n", 6), ("n", 8)],
    "PT": [("n", 4), ("n", 4), ("n", 11), ("n", 2)],
    "PL": [("n", 8), ("n", 16)],
}
IBAN_COUNTRIES = tuple(_BBAN)

# Real-looking bank identifiers for the letter-coded BBANs (GB/IE/NL use the
# first four letters of the bank's BIC as the bank code).
_BANK_CODES = {
    "GB": ["NWBK", "BARC", "LOYD", "HBUK", "MIDL", "SCBL", "MONZ", "SRLG"],
    "IE": ["AIBK", "BOFI", "IPBS", "ULSB"],
    "NL": ["ABNA", "INGB", "RABO", "SNSB", "TRIO", "ASNB", "KNAB", "BUNQ"],
}


def _block(rng: Rng, kind: str, n: int) -> str:
    if kind == "n":
        return rng.digits(n)
    if kind == "a":
        return rng.letters(n)
    # "c": mostly digits, as national account numbers usually are.
    return "".join(rng.pick("ABCDEFGHJKLMNPRSTUVWXYZ") if rng.chance(0.1) else rng.digits(1) for _ in range(n))


def _es_dc(digits: str) -> str:
    w = (1, 2, 4, 8, 5, 10, 9, 7, 3, 6)
    s = sum(int(d) * wi for d, wi in zip(digits, w))
    r = 11 - s % 11
    return str({10: 1, 11: 0}.get(r, r))


def bban(rng: Rng, country: str) -> str:
    blocks = [_block(rng, k, n) for k, n in _BBAN[country]]
    if country in _BANK_CODES:
        blocks[0] = rng.pick(_BANK_CODES[country])
    if country == "FR":
        bank, branch, acct = (int(b) for b in blocks[:3])
        blocks[3] = f"{97 - (89 * bank + 15 * branch + 3 * acct) % 97:02d}"
    elif country == "ES":
        blocks[2] = _es_dc("00" + blocks[0] + blocks[1]) + _es_dc(blocks[3])
    elif country == "BE":
        key = int(blocks[0] + blocks[1]) % 97 or 97
        blocks[2] = f"{key:02d}"
    return "".join(blocks)


def iban(rng: Rng, country: str, spaced: bool | None = None) -> str:
    body = bban(rng, country)
    check = 98 - _iban_numeric(body + country + "00") % 97
    s = f"{country}{check:02d}{body}"
    if spaced is None:
        spaced = rng.chance(0.6)
    return " ".join(s[i : i + 4] for i in range(0, len(s), 4)) if spaced else s


# (brand, prefixes, length, grouping)
_CARDS = [
    ("visa", ["4"], 16, (4, 4, 4, 4)),
    ("mastercard", [str(p) for p in range(51, 56)] + ["2221", "2300", "2450", "2599", "2720"], 16, (4, 4, 4, 4)),
    ("amex", ["34", "37"], 15, (4, 6, 5)),
    ("discover", ["6011", "644", "645", "649", "65"], 16, (4, 4, 4, 4)),
    ("jcb", ["3528", "3530", "3566", "3589"], 16, (4, 4, 4, 4)),
    ("diners", ["36"], 14, (4, 6, 4)),
]
_CARD_WEIGHTS = [40, 30, 12, 7, 6, 5]


def credit_card(rng: Rng) -> str:
    brand, prefixes, length, groups = rng.weighted(_CARDS, _CARD_WEIGHTS)
    p = rng.pick(prefixes)
    body = p + rng.digits(length - len(p) - 1)
    num = body + luhn_check_digit(body)
    sep = rng.weighted([" ", "-", ""], [50, 20, 30])
    if not sep:
        return num
    out, i = [], 0
    for g in groups:
        out.append(num[i : i + g])
        i += g
    return sep.join(out)


def us_bank_account(rng: Rng) -> str:
    n = rng.int(9, 12) if rng.chance(0.8) else rng.pick([8, 13, 14, 15, 16, 17])
    return str(rng.int(1, 9)) + rng.digits(n - 1)


# -------------------------------------------------------- government / health


def us_ssn(rng: Rng) -> str:
    while True:
        area = rng.int(1, 899)
        if area != 666:
            break
    num = f"{area:03d}{rng.int(1, 99):02d}{rng.int(1, 9999):04d}"
    style = rng.weighted(["-", " ", ""], [70, 15, 15])
    return num if not style else style.join((num[:3], num[3:5], num[5:]))


def us_passport(rng: Rng) -> str:
    if rng.chance(0.5):
        return rng.pick("ACEFGHJKLMNPRSTUVWXZ") + rng.digits(8)
    return str(rng.int(1, 9)) + rng.digits(8)


# state -> generator; written from the NTSI table (the most common layout of
# each state), including the spacing some states print on the card.
def _dl_ca(r: Rng) -> str:
    return r.letters(1) + r.digits(7)


def _dl_fl(r: Rng) -> str:
    s = r.letters(1) + r.digits(12)
    return f"{s[:4]}-{s[4:7]}-{s[7:9]}-{s[9:12]}-{s[12]}" if r.chance(0.5) else s


def _dl_il(r: Rng) -> str:
    s = r.letters(1) + r.digits(11)
    return f"{s[:4]}-{s[4:8]}-{s[8:]}" if r.chance(0.5) else s


def _dl_ny(r: Rng) -> str:
    s = r.digits(9)
    return f"{s[:3]} {s[3:6]} {s[6:]}" if r.chance(0.5) else s


def _dl_tx(r: Rng) -> str:
    return str(r.int(1, 4)) + r.digits(7)


def _dl_pa(r: Rng) -> str:
    s = r.digits(8)
    return f"{s[:2]} {s[2:5]} {s[5:]}" if r.chance(0.5) else s


def _dl_nj(r: Rng) -> str:
    s = r.letters(1) + r.digits(14)
    return f"{s[:5]} {s[5:10]} {s[10:]}" if r.chance(0.5) else s


def _dl_wa(r: Rng) -> str:
    return "WDL" + "".join(r.pick("ABCDEFGHJKLMNPQRSTUVWXYZ0123456789") for _ in range(9))


def _dl_oh(r: Rng) -> str:
    return r.letters(2) + r.digits(6)


def _dl_mi(r: Rng) -> str:
    s = r.letters(1) + r.digits(12)
    return f"{s[0]} {s[1:4]} {s[4:7]} {s[7:10]} {s[10:]}" if r.chance(0.5) else s


def _dl_wi(r: Rng) -> str:
    s = r.letters(1) + r.digits(13)
    return f"{s[:4]}-{s[4:8]}-{s[8:12]}-{s[12:]}" if r.chance(0.5) else s


def _dl_az(r: Rng) -> str:
    return r.letters(1) + r.digits(8)


_DL_FORMATS = {
    "CA": _dl_ca, "FL": _dl_fl, "IL": _dl_il, "NY": _dl_ny, "TX": _dl_tx, "PA": _dl_pa,
    "NJ": _dl_nj, "WA": _dl_wa, "OH": _dl_oh, "MI": _dl_mi, "WI": _dl_wi, "AZ": _dl_az,
}
DL_STATES = tuple(_DL_FORMATS)
STATE_NAMES = {
    "CA": "California", "FL": "Florida", "IL": "Illinois", "NY": "New York", "TX": "Texas",
    "PA": "Pennsylvania", "NJ": "New Jersey", "WA": "Washington", "OH": "Ohio",
    "MI": "Michigan", "WI": "Wisconsin", "AZ": "Arizona",
}


def us_driver_license(rng: Rng, state: str | None = None) -> tuple[str, str]:
    """``(state code, number)``."""
    state = state or rng.pick(DL_STATES)
    return state, _DL_FORMATS[state](rng)


def nhs_number(rng: Rng) -> str:
    while True:
        first9 = str(rng.int(4, 9)) + rng.digits(8)
        check = nhs_check_digit(first9)
        if check is not None:
            break
    s = first9 + str(check)
    sep = rng.weighted([" ", "-", ""], [60, 15, 25])
    return sep.join((s[:3], s[3:6], s[6:])) if sep else s


def dea_number(rng: Rng, surname: str) -> str:
    initial = _ascii(surname)[:1].upper() or "X"
    d = [rng.int(0, 9) for _ in range(6)]
    check = (d[0] + d[2] + d[4] + 2 * (d[1] + d[3] + d[5])) % 10
    return rng.pick("ABFGM") + initial + "".join(map(str, d)) + str(check)


def btc_address(rng: Rng) -> str:
    kind = rng.weighted(["p2pkh", "p2sh", "bech32"], [45, 20, 35])
    h = rng.randbytes(20)
    if kind == "bech32":
        return bech32_segwit_v0(h)
    return base58check((b"\x00" if kind == "p2pkh" else b"\x05") + h)


# ------------------------------------------------------------------ network


def ipv4(rng: Rng) -> str:
    style = rng.weighted(["public", "10", "192", "172"], [55, 20, 15, 10])
    if style == "10":
        return f"10.{rng.int(0, 255)}.{rng.int(0, 255)}.{rng.int(1, 254)}"
    if style == "192":
        return f"192.168.{rng.int(0, 255)}.{rng.int(1, 254)}"
    if style == "172":
        return f"172.{rng.int(16, 31)}.{rng.int(0, 255)}.{rng.int(1, 254)}"
    first = rng.pick([a for a in range(1, 224) if a not in (10, 127, 172, 192)])
    return f"{first}.{rng.int(0, 255)}.{rng.int(0, 255)}.{rng.int(1, 254)}"


def ipv6(rng: Rng) -> str:
    prefix = rng.pick([0x2001, 0x2A00, 0x2A02, 0x2600, 0x2607, 0x2804, 0xFD12])
    groups = [prefix, rng.int(0, 0xFFFF), rng.int(0, 0xFFFF), rng.int(0, 0xFF)]
    if rng.chance(0.5):  # an interface id with a zero run, as SLAAC/static hosts often have
        groups += [0, 0, 0, rng.int(1, 0xFFFF)]
    else:
        groups += [rng.int(0, 0xFFFF) for _ in range(4)]
    if rng.chance(0.3):  # RFC 4291 full form
        return ":".join(f"{g:04x}" for g in groups)
    return _ipv6_canonical(groups)


def _ipv6_canonical(groups: list[int]) -> str:
    # RFC 5952 4.2: compress the longest run (>= 2) of zero groups, first one on a tie.
    best_start, best_len, i = -1, 0, 0
    while i < 8:
        if groups[i] == 0:
            j = i
            while j < 8 and groups[j] == 0:
                j += 1
            if j - i > best_len:
                best_start, best_len = i, j - i
            i = j
        else:
            i += 1
    hexes = [f"{g:x}" for g in groups]
    if best_len < 2:
        return ":".join(hexes)
    return ":".join(hexes[:best_start]) + "::" + ":".join(hexes[best_start + best_len :])


# -------------------------------------------------------------------- phones

# country code -> (international prefix, generator of (trunk-prefixed
# national significant number parts)).  Each generator returns the digit
# groups of the national number *with* the trunk 0 where the country uses
# one; the formatter decides how to print them.


def _nanp(r: Rng) -> list[str]:
    npa = str(r.int(2, 9)) + str(r.int(0, 8)) + str(r.int(0, 9))
    while True:
        nxx = str(r.int(2, 9)) + r.digits(2)
        if nxx[1:] != "11":
            break
    return [npa, nxx, r.digits(4)]


def phone(rng: Rng, country: str) -> str:
    """A telephone number of ``country`` (US CA GB AU DE FR NL ES IT) in one of
    the surface forms people write."""
    r = rng
    if country in ("US", "CA"):
        a, b, c = _nanp(r)
        return r.pick([
            f"({a}) {b}-{c}", f"{a}-{b}-{c}", f"{a}.{b}.{c}", f"{a}{b}{c}", f"+1 {a} {b} {c}",
            f"+1-{a}-{b}-{c}", f"1-{a}-{b}-{c}", f"+1 ({a}) {b}-{c}", f"{a} {b} {c}",
        ])
    if country == "GB":
        kind = r.weighted(["mobile", "london", "area"], [50, 25, 25])
        if kind == "mobile":
            a, b = "7" + str(r.pick([4, 5, 7, 8, 9])) + r.digits(2), r.digits(6)
            return r.pick([f"0{a} {b}", f"0{a}{b}", f"+44 {a} {b}", f"+44 (0){a} {b}", f"+44{a}{b}", f"0{a} {b[:3]} {b[3:]}"])
        if kind == "london":
            a, b = str(r.pick([3, 7, 8])) + r.digits(3), r.digits(4)
            return r.pick([f"020 {a} {b}", f"(020) {a} {b}", f"+44 20 {a} {b}", f"+44 (0)20 {a} {b}", f"020{a}{b}"])
        code = r.pick(["161", "121", "113", "131", "141", "117", "1223", "1865", "1632", "1904"])
        rest = r.digits(10 - len(code))
        if len(code) == 3:
            return r.pick([f"0{code} {rest[:3]} {rest[3:]}", f"+44 {code} {rest[:3]} {rest[3:]}", f"(0{code}) {rest[:3]} {rest[3:]}"])
        return r.pick([f"0{code} {rest}", f"+44 {code} {rest}", f"(0{code}) {rest}"])
    if country == "AU":
        if r.chance(0.55):
            a, b, c = "4" + r.digits(2), r.digits(3), r.digits(3)
            return r.pick([f"0{a} {b} {c}", f"0{a}{b}{c}", f"+61 {a} {b} {c}", f"+61{a}{b}{c}", f"0{a}-{b}-{c}"])
        area, a, b = str(r.pick([2, 3, 7, 8])), str(r.int(3, 9)) + r.digits(3), r.digits(4)
        return r.pick([f"(0{area}) {a} {b}", f"0{area} {a} {b}", f"+61 {area} {a} {b}", f"0{area}{a}{b}"])
    if country == "DE":
        if r.chance(0.5):
            pre = r.pick(["151", "152", "157", "160", "162", "163", "170", "171", "172", "173", "175", "176", "177", "178", "179"])
            sub = r.digits(r.pick([7, 8]))
            return r.pick([f"0{pre} {sub}", f"0{pre}/{sub}", f"+49 {pre} {sub}", f"+49 (0){pre} {sub}", f"0{pre}-{sub}", f"+49{pre}{sub}"])
        area = r.pick(["30", "40", "89", "221", "69", "711", "211", "341", "351", "511"])
        sub = r.digits(10 - len(area) - r.int(0, 1))
        return r.pick([f"0{area} {sub}", f"0{area}/{sub}", f"+49 {area} {sub}", f"+49 (0){area} {sub}", f"0{area}-{sub}", f"(0{area}) {sub}"])
    if country == "FR":
        first = r.weighted(["1", "2", "3", "4", "5", "6", "7", "9"], [12, 6, 6, 8, 6, 35, 20, 7])
        pairs = [r.digits(2) for _ in range(4)]
        return r.pick([
            f"0{first} " + " ".join(pairs), f"0{first}." + ".".join(pairs), f"0{first}" + "".join(pairs),
            f"+33 {first} " + " ".join(pairs), f"+33 (0){first} " + " ".join(pairs), f"+33{first}" + "".join(pairs),
        ])
    if country == "NL":
        if r.chance(0.5):
            sub = r.digits(8)
            return r.pick([f"06-{sub}", f"06 {sub}", f"06 {sub[:2]} {sub[2:4]} {sub[4:6]} {sub[6:]}", f"+31 6 {sub}", f"+316{sub}", f"06{sub}"])
        area = r.pick(["20", "10", "70", "30", "40", "50", "43", "24"])
        sub = r.digits(7)
        return r.pick([f"0{area}-{sub}", f"(0{area}) {sub[:3]} {sub[3:]}", f"+31 {area} {sub[:3]} {sub[3:]}", f"0{area} {sub[:3]} {sub[3:]}", f"+31 (0){area} {sub}"])
    if country == "ES":
        if r.chance(0.55):
            n = r.pick(["6", "7"]) + r.digits(8)
            return r.pick([f"{n[:3]} {n[3:6]} {n[6:]}", n, f"+34 {n[:3]} {n[3:6]} {n[6:]}", f"+34 {n[:3]} {n[3:5]} {n[5:7]} {n[7:]}", f"+34{n}", f"{n[:3]}-{n[3:6]}-{n[6:]}"])
        n = r.pick(["91", "93", "95", "96", "94", "98"]) + r.digits(7)
        return r.pick([f"{n[:2]} {n[2:5]} {n[5:7]} {n[7:]}", f"{n[:3]} {n[3:6]} {n[6:]}", f"+34 {n[:3]} {n[3:6]} {n[6:]}", f"+34 {n[:2]} {n[2:5]} {n[5:7]} {n[7:]}", n])
    if country == "IT":
        if r.chance(0.55):
            n = "3" + r.digits(2) + r.digits(7)
            return r.pick([f"{n[:3]} {n[3:6]} {n[6:]}", f"{n[:3]} {n[3:]}", f"{n[:3]}-{n[3:]}", f"+39 {n[:3]} {n[3:6]} {n[6:]}", f"+39 {n}", n])
        area = r.pick(["06", "02", "011", "055", "081", "051", "041"])
        sub = r.digits(10 - len(area))
        return r.pick([f"{area} {sub[:4]} {sub[4:]}", f"{area} {sub}", f"+39 {area} {sub[:4]} {sub[4:]}", f"+39 {area} {sub}", f"{area}/{sub}", f"({area}) {sub}"])
    raise ValueError(f"no phone format for {country}")


# --------------------------------------------------------------------- dates

MONTHS = {
    "en": ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October", "November", "December"],
    "de": ["Januar", "Februar", "März", "April", "Mai", "Juni", "Juli", "August", "September", "Oktober", "November", "Dezember"],
    "fr": ["janvier", "février", "mars", "avril", "mai", "juin", "juillet", "août", "septembre", "octobre", "novembre", "décembre"],
    "nl": ["januari", "februari", "maart", "april", "mei", "juni", "juli", "augustus", "september", "oktober", "november", "december"],
    "es": ["enero", "febrero", "marzo", "abril", "mayo", "junio", "julio", "agosto", "septiembre", "octubre", "noviembre", "diciembre"],
    "it": ["gennaio", "febbraio", "marzo", "aprile", "maggio", "giugno", "luglio", "agosto", "settembre", "ottobre", "novembre", "dicembre"],
}
WEEKDAYS_EN = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]


def random_date(rng: Rng, start_year: int, end_year: int) -> _dt.date:
    # Never derived from "today": the corpora must not change with the clock.
    start = _dt.date(start_year, 1, 1).toordinal()
    end = _dt.date(end_year, 12, 31).toordinal()
    return _dt.date.fromordinal(rng.int(start, end))


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def format_date(rng: Rng, d: _dt.date, country: str) -> str:
    """``d`` written the way people in ``country`` write dates."""
    y, m, dd = d.year, d.month, d.day
    iso = f"{y:04d}-{m:02d}-{dd:02d}"
    if country == "US":
        mon = MONTHS["en"][m - 1]
        return rng.pick([f"{mon} {dd}, {y}", f"{m:02d}/{dd:02d}/{y}", f"{m}/{dd}/{y}", f"{m}/{dd}/{y % 100:02d}", f"{mon[:3]}. {dd}, {y}", iso, f"{mon} {_ordinal(dd)}, {y}"])
    if country in ("GB", "AU"):
        mon = MONTHS["en"][m - 1]
        return rng.pick([f"{dd} {mon} {y}", f"{dd:02d}/{m:02d}/{y}", f"{_ordinal(dd)} {mon} {y}", f"{dd} {mon[:3]} {y}", f"{dd}/{m}/{y % 100:02d}", iso, f"{dd:02d}.{m:02d}.{y}"])
    if country == "CA":
        mon = MONTHS["en"][m - 1]
        return rng.pick([iso, f"{mon} {dd}, {y}", f"{dd} {mon} {y}", f"{m:02d}/{dd:02d}/{y}"])
    if country == "DE":
        mon = MONTHS["de"][m - 1]
        return rng.pick([f"{dd:02d}.{m:02d}.{y}", f"{dd}.{m}.{y}", f"{dd}. {mon} {y}", f"{dd:02d}.{m:02d}.{y % 100:02d}", iso])
    if country == "FR":
        mon = MONTHS["fr"][m - 1]
        return rng.pick([f"{dd:02d}/{m:02d}/{y}", f"{dd} {mon} {y}", f"{'1er' if dd == 1 else dd} {mon} {y}", iso])
    if country == "NL":
        mon = MONTHS["nl"][m - 1]
        return rng.pick([f"{dd:02d}-{m:02d}-{y}", f"{dd}-{m}-{y}", f"{dd} {mon} {y}", iso])
    if country == "ES":
        mon = MONTHS["es"][m - 1]
        return rng.pick([f"{dd:02d}/{m:02d}/{y}", f"{dd} de {mon} de {y}", f"{dd}/{m}/{y}", f"{dd:02d}-{m:02d}-{y}"])
    if country == "IT":
        mon = MONTHS["it"][m - 1]
        return rng.pick([f"{dd:02d}/{m:02d}/{y}", f"{dd} {mon} {y}", f"{dd}/{m}/{y}", f"{dd:02d}.{m:02d}.{y}"])
    return iso


def format_time(rng: Rng, country: str) -> str:
    h, mi = rng.int(7, 19), rng.pick([0, 0, 15, 30, 45, 10, 20, 40, 50, 5])
    twelve_hour = rng.chance(0.7) if country == "US" else rng.chance(0.4) if country in ("AU", "CA", "GB") else False
    if twelve_hour:
        hh = h % 12 or 12
        half = "a" if h < 12 else "p"
        ampm = rng.pick([f"{half}m", f"{half}m".upper(), f"{half}.m."])
        return f"{hh}:{mi:02d} {ampm}" if mi or rng.chance(0.5) else f"{hh} {ampm}"
    if country == "FR" and rng.chance(0.4):
        return f"{h}h{mi:02d}" if mi else f"{h}h"
    return f"{h:02d}:{mi:02d}" if rng.chance(0.6) else f"{h}:{mi:02d}"


def rfc5322_date(rng: Rng, when: _dt.datetime, offset_minutes: int) -> str:
    # "Tue, 05 Mar 2024 14:03:11 +0100" (RFC 5322 section 3.3)
    sign = "+" if offset_minutes >= 0 else "-"
    off = abs(offset_minutes)
    return (
        f"{WEEKDAYS_EN[when.weekday()][:3]}, {when.day:02d} {MONTHS['en'][when.month - 1][:3]} {when.year} "
        f"{when.hour:02d}:{when.minute:02d}:{when.second:02d} {sign}{off // 60:02d}{off % 60:02d}"
    )


# -------------------------------------------------------------------- text


def _ascii(s: str) -> str:
    s = s.replace("ß", "ss").replace("ø", "o").replace("Ø", "O").replace("æ", "ae").replace("ł", "l").replace("Ł", "L")
    return unicodedata.normalize("NFKD", s).encode("ascii", "ignore").decode("ascii")


def email_local(first: str, last: str, rng: Rng) -> str:
    f = "".join(ch for ch in _ascii(first).lower() if ch.isalnum())
    l = "".join(ch for ch in _ascii(last).lower() if ch.isalnum() or ch == "-").strip("-")
    l = l or "x"
    f = f or "x"
    return rng.pick([f"{f}.{l}", f"{f}.{l}", f"{f[0]}{l}", f"{f}_{l}", f"{f}{l}{rng.int(1, 99)}", f"{f}.{l[0]}", f"{l}.{f}", f"{f}{rng.int(70, 99)}"])
