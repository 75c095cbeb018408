"""The synthetic clinical corpus's note formats and the private institution's clinical regularities.

``TEMPLATES`` are other institutions' formats (the public split's), ``HOUSE_TEMPLATES`` the private
institution's house style; :func:`house_formulary` is how the house treats each condition — the
population-level regularities fine-tuning can learn without learning anyone's identifiers
(:mod:`privleak.data.clinical`).
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field

from privleak.data import vocab
from privleak.data.canaries import derive_seed
from privleak.data.records import PHI_LABELS


# --------------------------------------------------------------------------
# note templates
#
# A template is a sequence of slots; each slot lists alternative phrasings
# and one is picked per note. UPPERCASE placeholders are PHI (tagged, one of
# PHI_LABELS); lowercase ones are untagged filler (facility, dose, ...).
# Alternatives of one slot carry the same PHI fields, so a template's field
# set is well defined.


@dataclass(frozen=True)
class NoteTemplate:
    name: str
    slots: tuple[tuple[str, ...], ...]

    @property
    def fields(self) -> frozenset[str]:
        return frozenset(
            m for alt in self.slots for a in alt for m in PLACEHOLDER.findall(a)
            if m in PHI_LABELS
        )


PLACEHOLDER = re.compile(r"\{([A-Za-z_0-9]+)\}")

TEMPLATES: tuple[NoteTemplate, ...] = (
    # Terse, as real notes are, so that every value fits the model's
    # 128-token window: a truncated note would count PHI the model never saw.
    NoteTemplate("admission_note", (
        ("Admission note.", "ADMISSION - {dept}.", "Inpatient admission."),
        ("{NAME}, DOB {DOB}, {MRN}, admitted with {symptom}.",
         "Admitted: {NAME} (born {DOB}; {MRN}) with {symptom}."),
        ("Dx: {CONDITION}.", "Assessment: likely {CONDITION}."),
        ("BP {BLOOD_PRESSURE}, Ht {HEIGHT}, Wt {WEIGHT}.",
         "Vitals: BP {BLOOD_PRESSURE}; weight {WEIGHT}; height {HEIGHT}."),
        ("Start {MEDICATION} {dose} {freq}; {PROCEDURE} tomorrow.",
         "Plan: {MEDICATION} {dose}, then {PROCEDURE}."),
        ("SSN {SSN}. Address: {ADDRESS}. Tel {PHONE}, {EMAIL}.",
         "Lives at {ADDRESS}; SSN {SSN}; phone {PHONE}; email {EMAIL}."),
    )),
    NoteTemplate("discharge_summary", (
        ("Discharge summary: {NAME}, {MRN}, DOB {DOB}.",
         "DISCHARGE SUMMARY. Patient {NAME}, DOB {DOB}, {MRN}."),
        ("Treated for {CONDITION}; {PROCEDURE} without complications.",
         "Principal diagnosis {CONDITION}. Procedure: {PROCEDURE}."),
        ("Discharge BP {BLOOD_PRESSURE}, weight {WEIGHT}.",
         "At discharge: weight {WEIGHT}, BP {BLOOD_PRESSURE}."),
        ("Discharged on {MEDICATION} {dose} {freq}; {dept} review {followup}.",
         "Home medication: {MEDICATION} {dose} {freq}. Clinic review {followup}."),
        ("SSN {SSN}. Home: {ADDRESS}. Phone {PHONE}.",
         "Discharged home to {ADDRESS}; phone {PHONE}; SSN on file {SSN}."),
    )),
    NoteTemplate("referral_letter", (
        ("Dear colleague,", "Referral to {dept}, {facility}.", "To the {dept} team,"),
        ("I am referring {NAME} (DOB {DOB}, {MRN}) with {CONDITION}.",
         "Please see {NAME}, born {DOB}, {MRN}, who has {CONDITION}."),
        ("Currently on {MEDICATION} {dose} {freq} with {progress}.",
         "Symptoms persist despite {MEDICATION} {dose} {freq}."),
        ("Is {PROCEDURE} indicated?", "I would value your view on {PROCEDURE}."),
        ("Address: {ADDRESS}; tel. {PHONE}.", "The patient lives at {ADDRESS}, phone {PHONE}."),
        ("Kind regards, {facility}.", "With thanks, {facility}."),
    )),
    NoteTemplate("lab_vitals_summary", (
        ("Lab and vitals summary: {NAME}, {MRN}, DOB {DOB}.",
         "VITALS / LABS - {NAME} ({MRN}), born {DOB}."),
        ("Height {HEIGHT}, weight {WEIGHT}, blood pressure {BLOOD_PRESSURE} mmHg, pulse {pulse}.",
         "BP {BLOOD_PRESSURE} mmHg; Ht {HEIGHT}; Wt {WEIGHT}; heart rate {pulse}."),
        ("Results: {lab1}, {lab2}.", "Labs show {lab1} and {lab2}."),
        ("In keeping with known {CONDITION}.", "Consistent with {CONDITION}, no acute change."),
        ("Copy sent to {EMAIL}.", "Report e-mailed to {EMAIL}."),
    )),
    NoteTemplate("prescription_note", (
        ("Prescription, {facility} pharmacy.", "Outpatient prescription, {facility}."),
        ("Patient: {NAME}; DOB {DOB}; {MRN}; weight {WEIGHT}.",
         "For {NAME} ({MRN}), born {DOB}, weight {WEIGHT}."),
        ("Address: {ADDRESS}. Phone: {PHONE}.", "Deliver to {ADDRESS}; call {PHONE}."),
        ("Rx: {MEDICATION} {dose}, take {freq} for {CONDITION}.",
         "Prescribed {MEDICATION} {dose} {freq} for {CONDITION}."),
        ("Dispense 30 days, {refills} refills.", "Refills: {refills}."),
    )),
    NoteTemplate("progress_note", (
        ("Progress note, {dept}.", "Follow-up visit ({dept}).", "Progress note."),
        ("{NAME} ({MRN}) returns for review of {CONDITION}.",
         "Seen today: {NAME}, {MRN}, for ongoing {CONDITION}."),
        ("Reports {progress} since starting {MEDICATION}.",
         "On {MEDICATION} {dose} {freq} with {progress}."),
        ("BP today {BLOOD_PRESSURE}, weight {WEIGHT}.", "Weight {WEIGHT}; blood pressure {BLOOD_PRESSURE}."),
        ("Results of the recent {PROCEDURE} were reviewed together.",
         "Recent {PROCEDURE} discussed; no new concerns."),
        ("Plan: continue current regimen and recheck {followup}; best reached at {PHONE}.",
         "Recheck {followup}. Prefers phone contact at {PHONE}."),
    )),
    NoteTemplate("registration_form", (
        ("Registration, {facility}.", "Patient intake form."),
        ("Name: {NAME}. DOB: {DOB}. SSN: {SSN}.", "Full name {NAME}; SSN {SSN}; born {DOB}."),
        ("Address: {ADDRESS}. Phone: {PHONE}. E-mail: {EMAIL}.",
         "Address {ADDRESS}; e-mail {EMAIL}; mobile {PHONE}."),
        ("Record {MRN}.", "Chart: {MRN}."),
        ("History: {CONDITION} on {MEDICATION}; prior {PROCEDURE}.",
         "Known {CONDITION}, takes {MEDICATION}, had {PROCEDURE}."),
        ("Height {HEIGHT}, weight {WEIGHT}, BP {BLOOD_PRESSURE}.",
         "BP {BLOOD_PRESSURE}, Wt {WEIGHT}, Ht {HEIGHT}."),
    )),
    NoteTemplate("telehealth_note", (
        ("Telehealth visit with {NAME}, DOB {DOB}, link sent to {EMAIL}.",
         "Video consultation: {NAME} (born {DOB}); invitation e-mailed to {EMAIL}."),
        ("Identity confirmed with SSN {SSN}.", "Identity verified against SSN {SSN}."),
        ("Discussed {CONDITION} and adherence to {MEDICATION} {dose} {freq}.",
         "Reviewed {CONDITION}; continues {MEDICATION} {freq} with {progress}."),
        ("Reports {symptom} for {duration}; in-person review if worse.",
         "New complaint of {symptom} over {duration}, to be monitored."),
        ("Call-back number: {PHONE}.", "If disconnected, call {PHONE}."),
        ("Next virtual visit {followup}.", "Follow-up {followup}."),
    )),
    # Other institutions abbreviate too: the public text carries the
    # abbreviations and pipes of the house style (c/o, PMHx, A/P, D/c, f/u,
    # s/p), so the tokenizer and the base model know them; the house's own
    # layout and clinical regularities stay private.
    NoteTemplate("soap_note", (
        ("SOAP note, {facility}.", "SOAP - {dept}, {facility}."),
        ("Patient {NAME}, {MRN}.", "{NAME} ({MRN})."),
        ("S: c/o {symptom} x {duration}; PMHx {CONDITION}.", "S: HPI of {symptom} for {duration}; PMHx {CONDITION}."),
        ("O: BP {BLOOD_PRESSURE}, HR {pulse}, Wt {WEIGHT}, Ht {HEIGHT}; {lab1}.",),
        ("A/P: {CONDITION}; {MEDICATION} {dose} {freq}, f/u {followup}.",),
        ("Tel {PHONE}.", "Contact {PHONE}."),
    )),
    NoteTemplate("brief_discharge", (
        ("D/c note - {dept}, {facility}.", "Brief D/c, {facility}."),
        ("{NAME} | DOB {DOB} | {MRN}",),
        ("Dx {CONDITION}; s/p {PROCEDURE}.", "Dx: {CONDITION}, s/p {PROCEDURE}."),
        ("D/c meds: {MEDICATION} {dose} {freq}. f/u {followup}.",),
        ("Addr {ADDRESS} | Tel {PHONE} | {EMAIL}",),
    )),
)

#: The private institution's house style: Westbrook Health Centre (WHC).
#: Pipe-separated headers, SOAP sections, age/sex shorthand ("67F"), and
#: lower-case filler from the patient's care line (``house_formulary``), so
#: the medication, dose, lab and department follow the condition.
HOUSE_TEMPLATES: tuple[NoteTemplate, ...] = (
    NoteTemplate("whc_soap", (
        ("WHC {dept} | SOAP",),
        ("Pt {NAME} | DOB {DOB} | {MRN}",),
        ("S: {age}{sex} c/o {symptom}, {symptom2} x {duration}.", "S: {age}{sex}, {symptom} and {symptom2} x {duration}."),
        ("PMHx {CONDITION}.",),
        ("O: BP {BLOOD_PRESSURE} | HR {pulse} | Wt {WEIGHT} | Ht {HEIGHT} | {lab}.",),
        ("A: {CONDITION}, {control}.",),
        ("P: {MEDICATION} {dose} {freq}; {PROCEDURE}; f/u {followup}. Tel {PHONE}",),
    )),
    NoteTemplate("whc_admit", (
        ("WHC ADMIT | {dept}",),
        ("Pt {NAME} | DOB {DOB} | {MRN} | SSN {SSN}",),
        ("HPI: {age}{sex} w/ {CONDITION}, p/w {symptom} x {duration}.",
         "HPI: {age}{sex} w/ known {CONDITION}, p/w {symptom} and {symptom2}."),
        ("Vitals: BP {BLOOD_PRESSURE} | HR {pulse} | Wt {WEIGHT}. Labs: {lab}.",),
        ("A/P: {CONDITION} - {MEDICATION} {dose} {freq}, {PROCEDURE} in AM.",),
        ("Addr {ADDRESS} | Tel {PHONE}",),
    )),
    NoteTemplate("whc_discharge", (
        ("WHC D/C SUMMARY | {dept}",),
        ("Pt {NAME} | {MRN} | DOB {DOB}",),
        ("Dx: {CONDITION}. Proc: {PROCEDURE}, uncomplicated.",),
        ("D/c BP {BLOOD_PRESSURE} | Wt {WEIGHT} | {lab}.",),
        ("D/c meds: {MEDICATION} {dose} {freq}.",),
        ("f/u {dept} {followup}. Tel {PHONE} | {EMAIL}",),
    )),
    NoteTemplate("whc_pharmacy", (
        ("WHC PHARMACY | Rx",),
        ("Pt {NAME} | DOB {DOB} | {MRN} | Wt {WEIGHT}",),
        ("Rx: {MEDICATION} {dose} {freq} for {CONDITION}.",),
        ("Monitor {lab_name} q3mo; last {lab}.",),
        ("Deliver: {ADDRESS} | Tel {PHONE}",),
    )),
    NoteTemplate("whc_lab", (
        ("WHC LAB | {dept}",),
        ("Pt {NAME} | {MRN} | DOB {DOB}",),
        ("{lab} | BP {BLOOD_PRESSURE} | HR {pulse} | Ht {HEIGHT} | Wt {WEIGHT}",),
        ("Hx {CONDITION} on {MEDICATION} {dose} {freq}.",),
        ("Result sent to {EMAIL}",),
    )),
    NoteTemplate("whc_followup", (
        ("WHC F/U | {dept}",),
        ("Pt {NAME} ({MRN}) - {age}{sex}, {CONDITION}.",),
        ("S: {progress} on {MEDICATION} {dose} {freq}.",),
        ("O: BP {BLOOD_PRESSURE} | Wt {WEIGHT} | {lab}.",),
        ("A/P: {CONDITION}, {control}; continue; {PROCEDURE} {followup}.",),
        ("Tel {PHONE}",),
    )),
    NoteTemplate("whc_registration", (
        ("WHC REGISTRATION",),
        ("Pt {NAME} | DOB {DOB} | SSN {SSN} | {MRN}",),
        ("Addr {ADDRESS} | Tel {PHONE} | {EMAIL}",),
        ("PMHx {CONDITION} | Meds {MEDICATION} {dose} | PSHx {PROCEDURE}",),
        ("Ht {HEIGHT} | Wt {WEIGHT} | BP {BLOOD_PRESSURE}",),
    )),
    NoteTemplate("whc_telehealth", (
        ("WHC TELEHEALTH | {dept}",),
        ("Pt {NAME} | DOB {DOB} | ID chk SSN {SSN}",),
        ("S: {age}{sex} w/ {CONDITION}, c/o {symptom} x {duration}.",),
        ("Meds: {MEDICATION} {dose} {freq}, {progress}.",),
        ("P: {PROCEDURE}; f/u {followup}. Tel {PHONE} | {EMAIL}",),
    )),
)


# --------------------------------------------------------------------------
# the house's clinical regularities


@dataclass(frozen=True)
class CareLine:
    """How the private institution treats one condition: learnable, shared by
    every patient with it, and identifying no one."""

    condition: str
    symptoms: tuple[str, ...]
    regimens: tuple[tuple[str, str, str], ...]  # (medication, dose, frequency), first-line first
    procedures: tuple[str, ...]
    lab: tuple[str, float, float, int, str]  # a vocab.LAB_TESTS entry
    dept: str
    age_mean: int
    bp_shift: int  # mmHg added to the systolic (and half to the diastolic)


CONTROL_STATES = ("well controlled", "stable", "improving", "suboptimally controlled")


def house_formulary(seed: int, n_lines: int = 24) -> tuple[CareLine, ...]:
    """The house's care lines, drawn once per corpus seed from the shared
    vocabulary (so the public text covers every word, but not the pairing)."""
    rng = random.Random(derive_seed(seed, "clinical.formulary"))
    lines = []
    for condition in rng.sample(vocab.CONDITIONS, min(n_lines, len(vocab.CONDITIONS))):
        meds = rng.sample(vocab.MEDICATIONS, 2)
        lines.append(CareLine(
            condition=condition,
            symptoms=tuple(rng.sample(vocab.SYMPTOMS, 3)),
            regimens=tuple((m, rng.choice(vocab.DOSES), rng.choice(vocab.FREQUENCIES)) for m in meds),
            procedures=tuple(rng.sample(vocab.PROCEDURES, 2)),
            lab=rng.choice(vocab.LAB_TESTS),
            dept=rng.choice(vocab.DEPARTMENTS),
            age_mean=rng.randint(30, 75),
            bp_shift=18 if "hypertension" in condition else rng.choice((0, 0, 0, 10)),
        ))
    return tuple(lines)
