"""A multi-domain PII corpus for benchmarking PII detection (e.g. against stock Presidio).

Splits
------
``build_pii_corpus(seed=0)`` is the held-out **REPORTING** split: numbers
quoted in reports come from it, and nobody tuning a recognizer may look at
it.  ``build_pii_corpus(seed=1)`` is the **DEVELOPMENT** split: whoever tunes
recognizers looks at seed 1 only.  Other seeds are free for experiments.

What is in it
-------------
About 3,000 records from five domains, each written in its own register:

* ``email``   corporate e-mail: headers, bodies, forwarded parts, signatures;
* ``chat``    instant messages: lower case, abbreviations, typos, no
  punctuation, emoji (see :func:`render.casualize`);
* ``legal``   contracts, leases, judgments, witness statements (parties,
  addresses, case numbers);
* ``finance`` payment instructions, statements, card disputes, KYC notes;
* ``hr``      HR notes and free text about people.

Entities appear both after cue words ("call me at ...", "IBAN: ...") and
bare, mid-sentence ("... 0612345678 still works?"); names appear in free
text, not only after "Name:".  Records are built for nine Faker locales
(en_US, en_GB, en_AU, en_CA, de_DE, fr_FR, nl_NL, es_ES, it_IT): names,
addresses, phone numbers, dates, IBAN countries and e-mail providers follow
the record's locale, and about a third of the non-English-locale records
are written in the locale's language.  About 20 % of records carry no PII
at all (they still contain amounts, order numbers, case numbers, versions
and percentages: numbers that are not PII), so precision can be measured.
Each PII record has 1 to 6 spans.

Labels (Presidio's entity names)
--------------------------------
PERSON, EMAIL_ADDRESS, PHONE_NUMBER, LOCATION, DATE_TIME, CREDIT_CARD,
IBAN_CODE, IP_ADDRESS, US_SSN, US_BANK_NUMBER, US_DRIVER_LICENSE,
US_PASSPORT, UK_NHS, URL, NRP, ORGANIZATION, MEDICAL_LICENSE (a US DEA
registration number), CRYPTO (a Bitcoin address).

Ground-truth conventions:

* LOCATION covers cities, countries, US states and **full street
  addresses** (one span for the whole single-line address, as Faker writes
  it for the locale, postcode included).
* DATE_TIME covers every temporal expression in the text: dates (including
  dates of birth and card expiry dates), clock times, durations ("30 days")
  and relative dates ("tomorrow", "next Friday"), matching Presidio's
  definition ("absolute or relative dates or periods or times smaller than a
  day").  The templates contain no other temporal words, so any unlabelled
  "Monday" or "March" would be a bug (the tests check this).
* PERSON spans cover the name only, never a title ("Dr.", "Herr", "M.D.").
* ORGANIZATION is labelled although stock Presidio does not report it by
  default, so a benchmark can show the gap.
* Case numbers, invoice/order/ticket numbers, amounts and versions are not
  PII and are not labelled (they are the hard negatives).
* NRP covers nationalities, religions and political affiliations.

All formats and their sources are listed in :mod:`tests.corpora.formats`.

Each record's ``meta`` holds ``domain``, ``locale``, ``seed``, ``lang`` (the
language of the text) and ``template`` (the template id, or ``none-<domain>``
for records without PII), so results can be sliced.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from . import formats as F
from .formats import Rng
from .people import (
    COUNTRY,
    COUNTRY_NAMES,
    IBAN_HOME,
    LANG,
    NATIONALITIES,
    POLITICAL,
    RELIGIONS,
    Person,
    World,
)
from .render import Seg, Template, casualize, make_record, write_jsonl

REPORTING_SEED = 0
DEVELOPMENT_SEED = 1

DOMAINS = ("email", "chat", "legal", "finance", "hr")
_DOMAIN_WEIGHTS = (22, 22, 18, 20, 18)
_LOCALE_WEIGHTS = {"en_US": 25, "en_GB": 15, "en_AU": 8, "en_CA": 8, "de_DE": 9, "fr_FR": 9,
                   "nl_NL": 8, "es_ES": 9, "it_IT": 9}
NO_PII_FRACTION = 0.2
MAX_ENTITIES = 6

# Slots that only make sense for one country.
_US_ONLY = {"ssn", "bank", "passport", "dl", "dl_state", "dea"}
_GB_ONLY = {"nhs"}


# ---------------------------------------------------------------- templates
# (id, domain, template).  Template ids are stable: benchmarks may slice by them.

_EN: list[tuple[str, str, str]] = [
    # ----------------------------------------------------------------- email
    ("em-visit", "email", "From: {p1} <{p1.email}>\nSubject: Re: site visit\n\nHi {p2.first},\n\nThe visit is confirmed for {date}. If anything changes, call me on {p1.phone}.\n\nBest,\n{p1.first}"),
    ("em-offsite-numbers", "email", "Subject: numbers for the offsite\n\nHi all,\n\n{p1} {p1.phone}\n{p2} {p2.phone}\n\nThe coach leaves from {addr} at {time}.\n\nCheers"),
    ("em-invoice", "email", "From: {p1.email}\nSubject: invoice {inv}\n\nDear {p2},\n\nPlease find attached invoice {inv} for {amt}. Payment to {iban} is due by {date}.\n\nKind regards\n{org}"),
    ("em-signin", "email", "From: IT Service Desk <{email}>\nSubject: unusual sign-in to your account\n\nHello {p1.first},\n\nWe noticed a sign-in to your mailbox from {ip} ({city}) on {date}. If this was not you, reset your password at {url}."),
    ("em-contract-address", "email", "Hi {p1.first},\n\nquick one: the contract from {org} still lists the old address ({addr}). Could you ask {p2} to send a corrected copy before {date}?\n\nThanks,\n{p3.first}"),
    ("em-signature", "email", "Thanks for the quick turnaround, much appreciated.\n\n--\n{p1}\nSenior Account Manager | {org}\n{addr}\nT {p1.phone}\n{url}"),
    ("em-ooo", "email", "Subject: Automatic reply: {subj}\n\nI am out of the office until {date} with limited access to e-mail. For urgent matters please contact {p2} ({p2.email}, {p2.phone})."),
    ("em-invite", "email", "Invitation: budget review @ {date} {time}\n\nOrganizer: {p1.email}\nLocation: {org} offices, {addr}\nJoin online: {url}"),
    ("em-forward", "email", "---------- Forwarded message ---------\nFrom: {p1} <{p1.email}>\nDate: {date}\nSubject: candidate feedback\n\nI spoke with {p2} after the panel and I think they would be a strong fit for the {city} office."),
    ("em-bank-change", "email", "Subject: updated bank details\n\nDear Accounts Team,\n\nPlease note that {org} has changed banks. With immediate effect, kindly remit all payments to IBAN {iban} (account holder: {p1}). The previous account should no longer be used.\n\nRegards,\n{p1}\nFinance Director"),
    ("em-contacts-bare", "email", "Subject: contacts\n\n{p1.email} is the right contact at {org}, {p2.email} no longer works there. Ask for {p1.first} if the switchboard puts you through."),
    ("em-refund-btc", "email", "Subject: refund request\n\nHi {p1.first},\n\nThe customer paid in bitcoin and asks for the refund to {btc} rather than the original wallet. Ticket {ref}. Can you confirm before {date}?"),
    ("em-card-booking", "email", "Hi {p1.first},\n\nfor the conference booking use the corporate card {card}, billing address {addr}.\n\nThanks!\n{p2.first}"),
    ("em-delegation", "email", "Hi {p1.first},\n\nthe delegation from {org} is mostly {nat}, so the dinner at {addr} should include vegetarian options. {p2.first} has the guest list."),
    ("em-phone-bare", "email", "Subject: Re: supplier call\n\nTried {phone} twice, no answer. Is {p1.phone} still the number for {p1}?"),
    ("em-mailing-list", "email", "Hi team,\n\nplease add {p1.email} and {p2.email} to the project list; both start on {date}.\n\nThanks"),
    ("em-ssn-payroll", "email", "Hi {p1.first},\n\nwelcome aboard! Payroll still needs your SSN ({ssn}) and the account number for direct deposit ({bank}). Reply to {p2.email} or call {p2.phone}."),
    ("em-dea-credentialing", "email", "Subject: credentialing - {p1}\n\nHi {p2.first}, Dr. {p1.last}'s DEA registration ({p1.dea}) renews on {date}; please update the file before then."),
    ("em-dea-pharmacy", "email", "Subject: controlled substance order {inv}\n\nThe pharmacy needs Dr. {p1.last}'s DEA number on the form: {p1.dea}. Can you confirm it with {p2.first}?"),
    ("em-passport-visa", "email", "Subject: visa letter\n\nHi {p1.first}, the embassy needs {p2}'s passport number ({passport}) and date of birth ({p2.dob}) for the invitation letter to {city}."),
    ("em-dl-rental", "email", "Hi {p1.first}, the rental desk in {city} needs the driver's {dl_state} licence number: {dl}. Booking ref {ref}."),
    ("em-nhs-referral", "email", "Subject: occupational health referral\n\nHi {p1.first},\n\nOccupational health need the NHS number of {p2} to book the assessment: {nhs}. The GP surgery is at {addr}."),
    # ------------------------------------------------------------------ chat
    ("ch-new-number", "chat", "hey its {p1.first} new number {p1.phone} save it"),
    ("ch-call-me", "chat", "call me at {phone} when ur free"),
    ("ch-meet", "chat", "{p1.first} said to meet at {addr} at {time}"),
    ("ch-texted", "chat", "omg {p2} from {org} just texted me"),
    ("ch-iban", "chat", "can u send the money to {iban} pls its {p1}s account"),
    ("ch-email", "chat", "my email is {p1.email} btw"),
    ("ch-email-bare", "chat", "{p1.email} is my new email the old one got hacked"),
    ("ch-moving", "chat", "lol {p1.first} is moving to {city} {rel}"),
    ("ch-pickup", "chat", "flight lands at {time} on {date} can u pick me up in {city}"),
    ("ch-address", "chat", "its {addr} buzz flat 3"),
    ("ch-card", "chat", "card number is {card} exp {exp} cvv {cvv}"),
    ("ch-coming", "chat", "{p2.first} and {p3.first} r coming too"),
    ("ch-his-number", "chat", "his number is {p2.phone} but he never picks up"),
    ("ch-bare-number", "chat", "{phone}"),
    ("ch-bare-email", "chat", "{p1.email}"),
    ("ch-quitting", "chat", "dont tell {p2.first} but im quitting {org} {rel}"),
    ("ch-site-down", "chat", "site is down again {url}"),
    ("ch-whitelist", "chat", "can someone whitelist {ip} on the vpn"),
    ("ch-friend", "chat", "ur {nat} friend was so nice at the party"),
    ("ch-btc", "chat", "send the btc to {btc} and ill send the voucher code"),
    ("ch-born", "chat", "born {p1.dob} so i guess im old now"),
    ("ch-bday", "chat", "happy bday {p1.first}!!!"),
    ("ch-meet-org", "chat", "meet u outside {org} on {street}"),
    ("ch-number-mid", "chat", "ok so {p1.phone} is {p1.first}s work phone dont give it out"),
    ("ch-ip-bare", "chat", "router says {ip} is connected but nothing loads"),
    ("ch-ssn", "chat", "my ssn is {ssn} for the form"),
    ("ch-dl", "chat", "license # {dl} ({dl_state}) if the rental place asks"),
    ("ch-bank", "chat", "acct {bank} thats the one for the rent"),
    ("ch-nhs", "chat", "nhs number {nhs} if they ask at reception"),
    ("ch-passport", "chat", "passport no is {passport} for the booking, expires {date}"),
    # ----------------------------------------------------------------- legal
    ("lg-agreement", "legal", "THIS AGREEMENT is made on {date} BETWEEN {org}, a company incorporated in {country} with its registered office at {addr} (the \"Supplier\"), AND {org2} (the \"Customer\")."),
    ("lg-matter", "legal", "IN THE MATTER OF {p1} v. {org}\nCase No. {case}\n\nThe plaintiff, {p1}, resides at {p1.addr} and was employed by the defendant from {date} to {date2}."),
    ("lg-witness-nat", "legal", "The Court heard evidence from {p2}, a {nat} national, who testified that the parties first met in {city} on {date}."),
    ("lg-lease", "legal", "The Landlord, {p1}, of {p1.addr}, lets to the Tenant, {p2}, the premises at {addr} for a term of {dur} commencing on {date}."),
    ("lg-notices", "legal", "Notices. Any notice under this Agreement shall be in writing and sent to {p1} at {email} or by post to {addr}."),
    ("lg-personnel", "legal", "Schedule 2 (Key Personnel): {p1} (Project Lead); {p2} (Data Protection Officer, {p2.email})."),
    ("lg-religion", "legal", "{p1.last} J: The appellant, a practising {relg}, submits that the dismissal on {date} amounted to discrimination."),
    ("lg-political", "legal", "The claimant, {p1}, alleges that promotion was refused because of a {pol} affiliation known to the panel."),
    ("lg-statement", "legal", "I, {p1}, of {p1.addr}, make this statement believing it to be true. On {date} at about {time} I was on {street} when I saw the collision."),
    ("lg-poa", "legal", "I, {p1}, born on {p1.dob} in {city}, hereby appoint {p2} as my attorney for the purposes of this instrument."),
    ("lg-settlement", "legal", "The settlement sum of {amt} shall be paid within {dur} into the client account of {org}, IBAN {iban}, quoting reference {case}."),
    ("lg-counsel", "legal", "Counsel for the respondent, {p1} of {org}, may be reached on {p1.phone} or at {p1.email}."),
    ("lg-registry", "legal", "Claim No. {case}. The defendant company, {org}, registered at {addr}, failed to file a defence by {date}."),
    ("lg-website", "legal", "The infringing material remained available at {url} until {date}, as the screenshots exhibited by {p1} show."),
    ("lg-ip-evidence", "legal", "The server logs record access from {ip} to the account of {p1} on {date} at {time}."),
    ("lg-defendant", "legal", "Defendant {p1} (DOB {p1.dob}; SSN {ssn}; {dl_state} DL No. {dl}) was arrested in {city}."),
    ("lg-dea", "legal", "Respondent {p1}, M.D., holder of DEA Certificate of Registration {p1.dea}, practised at {addr} until {date}."),
    ("lg-passport", "legal", "The passport of the accused, No. {passport}, issued to {p1}, was surrendered to the court on {date}."),
    ("lg-garnish", "legal", "The garnishee shall freeze account number {bank} held by {p1} at {org} pending further order."),
    ("lg-nhs-claim", "legal", "The Claimant ({p1}, NHS No. {nhs}) was treated at {org} following the accident on {date}."),
    # --------------------------------------------------------------- finance
    ("fi-transfer", "finance", "Please transfer {amt} to {p1}, IBAN {iban}, reference {inv}, value date {date}."),
    ("fi-statement", "finance", "Statement for {p1}\n{p1.addr}\nPeriod: {date} to {date2}\nCard: {card}\nClosing balance: {amt}"),
    ("fi-dispute", "finance", "Cardholder {p1} disputes a charge of {amt} made on {date} with card {card} at a merchant in {city}."),
    ("fi-wire", "finance", "Beneficiary: {org}\nBeneficiary address: {addr}\nIBAN: {iban}\nAmount: {amt}\nReference: {inv}"),
    ("fi-crypto-withdrawal", "finance", "Withdrawal of {btcamt} BTC to {btc} requested from IP {ip} on {date}."),
    ("fi-kyc", "finance", "KYC check for {p1}: DOB {p1.dob}, nationality {nat}, address {p1.addr}, phone {p1.phone}."),
    ("fi-fraud-sms", "finance", "{org}: a payment of {amt} to {p2} was attempted from your account. Not you? Call {phone}."),
    ("fi-iban-bare", "finance", "{p1.first} says {iban} is correct, I double-checked the letter."),
    ("fi-expense", "finance", "Reimburse {p1} {amt} for the taxi in {city} on {date}."),
    ("fi-invoice", "finance", "Invoice {inv}\nBill to: {p1}, {p1.addr}\nIssued: {date}\nPay by card or bank transfer to {iban}."),
    ("fi-lost-card", "finance", "Customer {p1} called from {p1.phone} to report the card {card} lost."),
    ("fi-card-bare", "finance", "Note on file: {card} was replaced, the old number must not be charged again."),
    ("fi-crypto-bare", "finance", "Funds traced to {btc}; the exchange in {country} has been asked to freeze them."),
    ("fi-portal", "finance", "Your e-statement is ready. Log in at {url} to view it. Questions? {email}"),
    ("fi-ach", "finance", "Direct deposit authorization: I, {p1}, authorize {org} to deposit my pay into account number {bank}."),
    ("fi-loan", "finance", "Loan application: applicant {p1}, SSN {ssn}, employer {org}, declared income {amt}."),
    ("fi-wire-us", "finance", "Please wire the deposit to account {bank} at {org}; the account holder is {p1}."),
    ("fi-id-check", "finance", "Account opening for {p1}: ID verified against {dl_state} driver license {dl} on {date}."),
    ("fi-kyc-us", "finance", "KYC (US person): {p1}, passport {passport}, DOB {p1.dob}, SSN {ssn}."),
    ("fi-pharmacy", "finance", "Remittance for controlled-substance order {inv}: prescriber Dr. {p1} (DEA {p1.dea}), amount {amt}."),
    # -------------------------------------------------------------------- hr
    ("hr-joined", "hr", "{p1} joined the {city} team on {date} after a long stint at {org}."),
    ("hr-review", "hr", "{p1.first} has exceeded expectations on every objective; {p2.first} recommends promotion."),
    ("hr-emergency", "hr", "Emergency contact: {p2} ({p2.phone}), {p2.addr}"),
    ("hr-interview", "hr", "I interviewed {p1} for the analyst role. The candidate previously worked for {org} in {city} and can start on {date}."),
    ("hr-religion", "hr", "{p1} asked whether a quiet room is available at the {city} office; {p1.first} is a practising {relg}."),
    ("hr-reference", "hr", "Reference: I have known {p1} since {date}, when we worked together at {org}."),
    ("hr-relocation", "hr", "{p1} is relocating from {city} to {city2} and will be based at {addr}."),
    ("hr-accounts", "hr", "Please create accounts for {p1} ({p1.email}); the laptop goes to {p1.addr}. Static IP {ip} is reserved for the lab machine."),
    ("hr-rota", "hr", "Spoke to {p1.first} and {p2.first} about the rota, {p3.first} will cover the late shift."),
    ("hr-councillor", "hr", "{p1} is a {pol} councillor in {city} and has asked for unpaid leave during the campaign."),
    ("hr-exit", "hr", "The exit interview with {p1} raised concerns about remarks on {p1.first}'s {nat} background."),
    ("hr-payroll-iban", "hr", "Payroll correction for {p1}: salary was paid to {iban} instead of the new account."),
    ("hr-portfolio", "hr", "Applicant portfolio: {url} (contact {p1.email}, {p1.phone})"),
    ("hr-dob", "hr", "{p1} (born {p1.dob}) qualifies for the long-service award at {org}."),
    ("hr-free-names", "hr", "Honestly {p1.first} carried the project, and {p2} should get more credit than {p3.last} gave in the review."),
    ("hr-fleet", "hr", "Company car assigned to {p1}; licence on file: {dl} ({dl_state}), checked by {p2.first}."),
    ("hr-i9", "hr", "I-9 documents for {p1}: US passport {passport}, expiring {date}."),
    ("hr-travel-profile", "hr", "Travel profile updated for {p1}: passport {passport}, nationality {nat}, home airport {city}."),
    ("hr-background", "hr", "Background check for {p1}: {dl_state} driver license {dl}, DOB {p1.dob}, current address {p1.addr}."),
    ("hr-dependents", "hr", "Benefits enrollment for {p1}: spouse {p2}, DOB {p2.dob}, SSN {ssn}."),
    ("hr-credentialing", "hr", "Credentialing for Dr. {p1}: DEA {p1.dea} verified on {date}."),
    ("hr-direct-deposit", "hr", "New direct deposit for {p1}: account {bank}, effective {date}."),
    ("hr-sickness", "hr", "Sickness absence: {p1} (NHS number {nhs}) is signed off until {date}."),
    ("hr-oh-bare", "hr", "OH form for {p1.first} returned, {nhs} confirmed against the GP letter."),
]

# Templates in the locale's own language: (id, domain, lang, template).
_NATIVE: list[tuple[str, str, str, str]] = [
    ("de-email", "email", "de", "Hallo {p1.first},\n\nkannst du mich unter {p1.phone} zurückrufen? Es geht um die Rechnung {inv} von {org}.\n\nViele Grüße\n{p2.first}"),
    ("de-finance", "finance", "de", "Bitte überweisen Sie den Betrag von {amt} bis zum {date} auf das Konto {iban} (Kontoinhaber: {p1})."),
    ("de-chat", "chat", "de", "hey {p1.first} bin grad in {city} angekommen, ruf mich an {phone}"),
    ("de-legal", "legal", "de", "Der Mieter {p1}, wohnhaft {p1.addr}, geboren am {p1.dob}, verpflichtet sich zur pünktlichen Zahlung der Miete."),
    ("de-hr", "hr", "de", "Herr {p1.last} ist seit dem {date} bei {org} in {city} beschäftigt."),
    ("fr-email", "email", "fr", "Bonjour {p1.first},\n\nPourriez-vous me rappeler au {p1.phone} ? Je suis joignable à partir de {time}.\n\nCordialement,\n{p2}"),
    ("fr-finance", "finance", "fr", "Merci d'effectuer le virement de {amt} sur le compte {iban} au nom de {p1} avant le {date}."),
    ("fr-chat", "chat", "fr", "coucou {p1.first} t'es où? moi je suis à {city} appelle moi {phone}"),
    ("fr-legal", "legal", "fr", "Le bail est consenti à {p1}, né le {p1.dob}, demeurant {p1.addr}."),
    ("fr-hr", "hr", "fr", "{p1} a rejoint l'équipe de {city} le {date} après un passage chez {org}."),
    ("nl-email", "email", "nl", "Hoi {p1.first},\n\nkun je me terugbellen op {p1.phone}? Het gaat over factuur {inv}.\n\nGroet,\n{p2.first}"),
    ("nl-finance", "finance", "nl", "Graag het bedrag van {amt} overmaken naar {iban} t.n.v. {p1} vóór {date}."),
    ("nl-chat", "chat", "nl", "haha {p1.first} woont nu in {city} echt waar"),
    ("nl-legal", "legal", "nl", "{p1}, geboren op {p1.dob}, wonende te {p1.addr}, hierna te noemen: huurder."),
    ("nl-hr", "hr", "nl", "{p1} werkt sinds {date} bij {org} in {city}."),
    ("es-email", "email", "es", "Hola {p1.first},\n\n¿me puedes llamar al {p1.phone}? Es sobre la factura {inv}.\n\nUn saludo,\n{p2.first}"),
    ("es-finance", "finance", "es", "Por favor, realice la transferencia de {amt} a la cuenta {iban} a nombre de {p1} antes del {date}."),
    ("es-chat", "chat", "es", "jajaja {p1.first} se muda a {city}"),
    ("es-legal", "legal", "es", "D. {p1}, con domicilio en {p1.addr}, nacido el {p1.dob}, en adelante el arrendatario."),
    ("es-hr", "hr", "es", "{p1} se incorporó al equipo de {city} el {date} tras su paso por {org}."),
    ("it-email", "email", "it", "Ciao {p1.first},\n\nmi richiami al {p1.phone}? Si tratta della fattura {inv}.\n\nGrazie,\n{p2.first}"),
    ("it-finance", "finance", "it", "Si prega di effettuare il bonifico di {amt} sul conto {iban} intestato a {p1} entro il {date}."),
    ("it-chat", "chat", "it", "{p1.first} si trasferisce a {city} ahah"),
    ("it-legal", "legal", "it", "Il sig. {p1}, nato il {p1.dob} e residente in {p1.addr}, di seguito denominato conduttore."),
    ("it-hr", "hr", "it", "{p1} lavora presso {org} a {city} dal {date}."),
]
_NATIVE_SHARE = 0.35

# Sentences without any PII, per domain; records without PII are built from
# 1-4 of them.  Fillers ({amt}, {ref}, ...) are not PII.
_NO_PII: dict[str, list[str]] = {
    "email": [
        "Please find the updated figures attached.", "Could you review the draft before we send it out?",
        "I've moved the action items to the shared tracker.", "Thanks, that works for me.",
        "The build is green again, merging now.", "Ticket {ref} has been resolved and closed.",
        "The printer on the third floor is out of toner again.", "Let's keep the scope as agreed and revisit after the pilot.",
        "Subject: draft v{ver}", "Subject: Re: figures for the board pack", "Subject: quick question",
        "Sorry for the delay, I was waiting on the numbers.", "Budget line {ref} is now at {pct} of plan.",
        "Attached is version {ver} with your comments addressed.", "Happy to discuss on the call.",
        "We ordered {qty} more monitors for the project room.", "Can we close this out before the review?",
        "Please do not reply to this message.", "Room {room} is booked for the review.",
    ],
    "chat": [
        "lol same", "ok see u there", "did u finish the slides", "running late sorry", "can u bring the charger",
        "thats hilarious", "whats the wifi password", "need coffee asap", "ok cool", "brb", "haha no way",
        "u coming or not", "i owe u one", "who took my mug", "nvm found it", "this meeting could have been an email",
        "pizza or sushi", "sent u the file", "the train is packed again", "order {ref} still not here",
        "i paid {amt} for that", "battery at {pct}", "version {ver} is broken again", "yep", "k",
    ],
    "legal": [
        "Each party shall bear its own costs.", "Nothing in this Agreement shall operate to exclude liability for fraud.",
        "The headings are for convenience only and shall not affect interpretation.",
        "Case No. {case}: the application is dismissed with costs.",
        "This Agreement may be executed in any number of counterparts.",
        "The Supplier shall maintain adequate insurance with a reputable insurer.",
        "If any provision is held invalid, the remaining provisions shall continue in full force.",
        "The appeal is allowed and the matter remitted for rehearing.", "Claim No. {case} is stayed by consent.",
        "No variation of this Agreement shall be effective unless in writing and signed by both parties.",
        "The liability cap under clause {n} is {amt}.", "Interest accrues at {pct} above the base rate.",
    ],
    "finance": [
        "Total due: {amt}. VAT included at {pct}.", "Order {ref} has been dispatched.",
        "Your transaction of {amt} was declined.", "Balance carried forward: {amt}.", "FX fee of {pct} applied.",
        "Reference {inv} matched to payment.", "Direct debit collected: {amt}.", "Invoice {inv} is now overdue.",
        "Refund of {amt} issued for order {ref}.", "Interest rate changed to {pct}.",
        "Please allow for processing before the funds appear.", "Minimum payment: {amt}.",
    ],
    "hr": [
        "Reminder to complete the mandatory security training.", "The canteen now offers vegetarian options as standard.",
        "Please submit expense claims with receipts attached.", "Hybrid working guidelines have been updated on the intranet.",
        "The pay review budget is {pct} of payroll.", "Headcount request {ref} approved for {qty} roles.",
        "Parking permits are allocated by lottery.", "All managers should complete calibration before the deadline.",
        "The wellbeing survey response rate was {pct}.", "Desk booking is now mandatory on floor {n}.",
    ],
}

_SUBJECTS = ["project update", "board pack", "sales numbers", "offsite logistics", "contract renewal",
             "draft proposal", "supplier review", "training session", "office move", "team lunch"]
_DURATIONS = ["30 days", "14 days", "two weeks", "six months", "12 months", "48 hours", "three years",
              "10 business days", "a fortnight", "90 days", "one year", "five working days"]
_RELATIVE = ["tomorrow", "next week", "next month", "on Friday", "this weekend", "next Monday", "tonight",
             "in a couple of weeks", "next summer", "in two weeks"]


def _amount(rng: Rng, country: str) -> str:
    whole = rng.pick([rng.int(5, 99), rng.int(100, 999), rng.int(1000, 25000)])
    cents = rng.int(0, 99)
    if country == "US" or country == "CA" or country == "AU":
        sym = {"US": "$", "CA": "$", "AU": "A$"}[country] if rng.chance(0.8) else "USD "
        return f"{sym}{whole:,}.{cents:02d}"
    if country == "GB":
        return f"£{whole:,}.{cents:02d}"
    euro = f"{whole:,}".replace(",", ".") + f",{cents:02d}"
    return rng.pick([f"{euro} €", f"€ {euro}", f"EUR {euro}"])


def _case_number(rng: Rng, country: str) -> str:
    if country == "US":
        return f"{rng.int(1, 4)}:{rng.int(10, 25)}-cv-{rng.digits(5)}"
    if country == "GB":
        return f"{rng.pick(['HQ', 'KB', 'QB', 'CL'])}{rng.int(10, 25)}X{rng.digits(5)}"
    if country == "DE":
        return f"{rng.int(1, 30)} O {rng.int(1, 999)}/{rng.int(10, 25)}"
    return f"{rng.letters(2)}-{rng.digits(6)}"


class _Ctx:
    """Resolves the slots of one record; a slot used twice gets one value."""

    def __init__(self, world: World, rng: Rng, loc: str) -> None:
        self.w, self.r, self.loc = world, rng, loc
        self.country = COUNTRY[loc]
        self.cache: dict[str, tuple[str, str | None]] = {}
        self.persons: dict[str, Person] = {}
        self.dl: tuple[str, str] | None = None

    def person(self, key: str) -> Person:
        if key not in self.persons:
            # Mostly people of the record's locale, sometimes from elsewhere
            # (international business), but never duplicating a name.
            loc = self.loc if self.r.chance(0.8) else self.r.pick(self.w.locales)
            taken = {p.full for p in self.persons.values()}
            while True:
                p = self.w.person(self.r, loc)
                if p.full not in taken and p.first not in {q.first for q in self.persons.values()} \
                        and p.last not in {q.last for q in self.persons.values()}:
                    break
            if loc != self.loc:  # contact details still local to the record
                p.phone = F.phone(self.r, self.country)
            self.persons[key] = p
        return self.persons[key]

    def __call__(self, slot: str) -> tuple[str, str | None]:
        if slot not in self.cache:
            self.cache[slot] = self._make(slot)
        return self.cache[slot]

    def _make(self, slot: str) -> tuple[str, str | None]:
        r, c, loc = self.r, self.country, self.loc
        base, _, attr = slot.partition(".")
        if base in ("p1", "p2", "p3"):
            p = self.person(base)
            attr = attr or "full"
            if attr in ("full", "first", "last"):
                return {"full": p.full, "first": p.first, "last": p.last}[attr], "PERSON"
            if attr == "email":
                return p.email, "EMAIL_ADDRESS"
            if attr == "phone":
                return p.phone, "PHONE_NUMBER"
            if attr == "dob":
                return F.format_date(r, F.random_date(r, 1945, 2004), c), "DATE_TIME"
            if attr == "addr":
                return self.w.address(loc), "LOCATION"
            if attr == "dea":
                return F.dea_number(r, p.last), "MEDICAL_LICENSE"
            raise KeyError(slot)
        kind = base.rstrip("0123456789")
        if kind == "org":
            taken = {v for k, (v, _) in self.cache.items() if k.startswith("org")}
            while True:
                v = self.w.company(loc)
                if v not in taken:
                    return v, "ORGANIZATION"
        if kind == "city":
            taken = {v for k, (v, _) in self.cache.items() if k.startswith("city")}
            while True:
                v = self.w.city(r, loc)
                if v not in taken:
                    return v, "LOCATION"
        if kind == "country":
            return r.pick(COUNTRY_NAMES), "LOCATION"
        if kind == "addr":
            return self.w.address(loc), "LOCATION"
        if kind == "street":
            return self.w.street(loc), "LOCATION"
        if kind == "date":
            return F.format_date(r, F.random_date(r, 2015, 2025), c), "DATE_TIME"
        if kind == "time":
            return F.format_time(r, c), "DATE_TIME"
        if kind == "dur":
            return r.pick(_DURATIONS), "DATE_TIME"
        if kind == "rel":
            return r.pick(_RELATIVE), "DATE_TIME"
        if kind == "exp":
            return f"{r.int(1, 12):02d}/{r.int(25, 31)}", "DATE_TIME"
        if kind == "card":
            return F.credit_card(r), "CREDIT_CARD"
        if kind == "iban":
            return F.iban(r, r.pick(IBAN_HOME[c])), "IBAN_CODE"
        if kind == "ip":
            return (F.ipv4(r) if r.chance(0.75) else F.ipv6(r)), "IP_ADDRESS"
        if kind == "ssn":
            return F.us_ssn(r), "US_SSN"
        if kind == "passport":
            return F.us_passport(r), "US_PASSPORT"
        if kind in ("dl", "dl_state"):
            if self.dl is None:
                self.dl = F.us_driver_license(r)
            state, number = self.dl
            return (number, "US_DRIVER_LICENSE") if kind == "dl" else (F.STATE_NAMES[state], "LOCATION")
        if kind == "bank":
            return F.us_bank_account(r), "US_BANK_NUMBER"
        if kind == "nhs":
            return F.nhs_number(r), "UK_NHS"
        if kind == "btc":
            return F.btc_address(r), "CRYPTO"
        if kind == "url":
            return self._url(), "URL"
        if kind == "email":
            dom = self.w.faker(loc).domain_name()
            return f"{r.pick(['info', 'servicedesk', 'legal', 'support', 'notices', 'billing'])}@{dom}", "EMAIL_ADDRESS"
        if kind == "phone":
            return F.phone(r, c), "PHONE_NUMBER"
        if kind == "nat":
            return r.pick(NATIONALITIES), "NRP"
        if kind == "relg":
            return r.pick(RELIGIONS), "NRP"
        if kind == "pol":
            return r.pick(POLITICAL), "NRP"
        # ---- fillers: not PII
        if kind == "amt":
            return _amount(r, c), None
        if kind == "btcamt":
            return f"0.{r.digits(4)}", None
        if kind == "pct":
            return f"{r.int(1, 99)}{r.pick(['', '.5'])}%", None
        if kind == "qty":
            return str(r.int(2, 40)), None
        if kind == "ref":
            return r.pick([f"INC{r.digits(7)}", f"ORD-{r.digits(6)}", f"#{r.digits(5)}", f"TKT-{r.digits(4)}-{r.letters(2)}"]), None
        if kind == "inv":
            return r.pick([f"INV-{r.digits(5)}", f"{r.letters(2)}{r.digits(6)}", f"F{r.digits(4)}/{r.digits(3)}"]), None
        if kind == "case":
            return _case_number(r, c), None
        if kind == "ver":
            return f"{r.int(1, 9)}.{r.int(0, 20)}.{r.int(0, 9)}", None
        if kind == "room":
            return f"{r.int(1, 9)}.{r.int(1, 40):02d}", None
        if kind == "n":
            return str(r.int(2, 30)), None
        if kind == "cvv":
            return r.digits(3), None
        if kind == "subj":
            return r.pick(_SUBJECTS), None
        raise KeyError(f"unknown slot {slot!r}")

    def _url(self) -> str:
        r = self.r
        dom = self.w.faker(self.loc).domain_name()
        path = r.pick(["login", "account/statements", "careers", "docs/policy.pdf", "s/" + r.letters(6).lower(),
                       "portfolio", "support/ticket", "en/contact", "files/" + r.digits(6)])
        return r.pick([f"https://www.{dom}/{path}", f"https://{dom}/{path}", f"http://{dom}", f"www.{dom}/{path}",
                       f"https://portal.{dom}/{path}?id={r.digits(6)}", f"https://{dom}"])


def _countries_for(template: Template) -> str | None:
    slots = {s.split(".")[-1] if s.startswith("p") and "." in s else s for s in template.slots()}
    slots = {s.rstrip("0123456789") for s in slots}
    if slots & _US_ONLY:
        return "US"
    if slots & _GB_ONLY:
        return "GB"
    return None


_TEMPLATES: list[tuple[str, str, str, str | None, Template]] | None = None


def _templates() -> list[tuple[str, str, str, str | None, Template]]:
    """(id, domain, lang, country or None, template), parsed once."""
    global _TEMPLATES
    if _TEMPLATES is None:
        out = []
        for tid, dom, src in _EN:
            t = Template(src, tid)
            out.append((tid, dom, "en", _countries_for(t), t))
        for tid, dom, lang, src in _NATIVE:
            out.append((tid, dom, lang, None, Template(src, tid)))
        _TEMPLATES = out
    return _TEMPLATES


_NO_PII_TEMPLATES = {dom: [Template(s) for s in sents] for dom, sents in _NO_PII.items()}


def _no_pii_record(rng: Rng, ctx: _Ctx, domain: str) -> list[Seg]:
    k = rng.int(1, 2) if domain == "chat" else rng.int(1, 4)
    sents = list(_NO_PII_TEMPLATES[domain])
    rng.shuffle(sents)
    joiner = "\n" if domain == "chat" else rng.pick([" ", " ", "\n", "\n\n"])
    segs: list[Seg] = []
    for i, t in enumerate(sents[:k]):
        if i:
            segs.append((joiner, None))
        segs.extend(t.render(ctx))
    return segs


def _render_relative(t: Template, ctx: _Ctx) -> list[Seg]:
    # "on Friday" / "in two weeks": the preposition is not part of the date.
    segs = t.render(ctx)
    out: list[Seg] = []
    for text, label in segs:
        if label == "DATE_TIME" and text.startswith(("on ", "in ")) and text in _RELATIVE:
            prep, rest = text.split(" ", 1)
            out.append((prep + " ", None))
            out.append((rest, label))
        else:
            out.append((text, label))
    return out


def build_pii_corpus(n: int = 3000, seed: int = REPORTING_SEED) -> list[dict[str, Any]]:
    """``n`` records ``{"text", "pii", "meta"}``; seed 0 = REPORTING split,
    seed 1 = DEVELOPMENT split (see the module docstring)."""
    world = World(seed)
    rng = Rng(f"pii-{seed}")
    templates = _templates()
    locs = list(_LOCALE_WEIGHTS)
    lweights = [_LOCALE_WEIGHTS[l] for l in locs]
    out: list[dict[str, Any]] = []
    # Every locale at least once even for tiny n: cycle through them first.
    for i in range(n):
        loc = locs[i] if i < len(locs) else rng.weighted(locs, lweights)
        country, lang = COUNTRY[loc], LANG[loc]
        domain = rng.weighted(DOMAINS, _DOMAIN_WEIGHTS)
        ctx = _Ctx(world, rng, loc)
        if rng.chance(NO_PII_FRACTION):
            segs = _no_pii_record(rng, ctx, domain)
            tid, tlang = f"none-{domain}", "en"
        else:
            if lang != "en" and rng.chance(_NATIVE_SHARE):
                pool = [t for t in templates if t[2] == lang]
                tid, domain, tlang, _, tpl = rng.pick(pool)
            else:
                pool = [t for t in templates if t[1] == domain and t[2] == "en"]
                local = [t for t in pool if t[3] == country]
                general = [t for t in pool if t[3] is None]
                # Country-specific identifiers (SSN, NHS number ...) are rare
                # in the template list; give them a fixed share of their
                # country's records so each label gets enough support.
                share = {"US": 0.45, "GB": 0.25}.get(country, 0.0)
                chosen = rng.pick(local) if local and rng.chance(share) else rng.pick(general)
                tid, _, tlang, _, tpl = chosen
            segs = _render_relative(tpl, ctx)
        if domain == "chat":
            segs = casualize(segs, rng)
        meta = {"domain": domain, "locale": loc, "seed": seed, "lang": tlang, "template": tid}
        out.append(make_record(segs, meta, max_entities=MAX_ENTITIES))
    return out


def write_pii_corpus(path: str | Path, n: int = 3000, seed: int = REPORTING_SEED) -> Path:
    return write_jsonl(build_pii_corpus(n, seed), path)
