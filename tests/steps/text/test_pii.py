from collections import Counter

import pytest

from curation.core.record import QuarantineSink, Record
from curation.errors import RecipeError
from curation.steps.text.pii import PIIRedactor, iban_valid, redact


def test_emails_are_replaced_and_counted():
    text, counts = redact("Write to jane.doe+news@mail.example.co.uk or to ops@corp.io, not to @handle.")
    assert text == "Write to email@example.com or to email@example.com, not to @handle."
    assert counts == Counter(email=2)


def test_public_ipv4_and_ipv6_are_replaced_private_ones_kept_as_datatrove_does():
    text, counts = redact("Resolver 8.8.8.8 answered; the router at 192.168.0.1 and 127.0.0.1 did not. "
                          "IPv6 peer 2606:4700:4700::1111, docs prefix 2001:db8::1, link-local fe80::1.",
                          kinds=("ip",), ip_replacement="<IP>")
    assert text == ("Resolver <IP> answered; the router at 192.168.0.1 and 127.0.0.1 did not. "
                    "IPv6 peer <IP>, docs prefix 2001:db8::1, link-local fe80::1.")
    assert counts == Counter(ip=2)


def test_ip_lookalikes_are_kept():
    text = "version 3.10.12, build 11.2.3.45x, slice a[1::2], at 12:30:45, MAC 00:1A:2B:3C:4D:5E"
    assert redact(text) == (text, Counter())


def test_ip_replacements_cycle_per_text_so_output_is_deterministic():
    text = "1.1.1.1 and 9.9.9.9"
    first = redact(text, ip_replacement=("A", "B"))
    assert first == ("A and B", Counter(ip=2))
    assert redact(text, ip_replacement=("A", "B")) == first


@pytest.mark.parametrize("iban", ["DE89 3704 0044 0532 0130 00", "GB82WEST12345698765432",
                                  "GB82 WEST 1234 5698 7654 32", "NO9386011117947"])
def test_valid_ibans_are_replaced(iban):
    assert iban_valid(iban)
    text, counts = redact(f"Please pay to IBAN {iban} by Friday.")
    assert text == "Please pay to IBAN <IBAN> by Friday."
    assert counts == Counter(iban=1)


def test_iban_followed_by_an_upper_case_word_and_bad_checksums():
    assert redact("IBAN DE89 3704 0044 0532 0130 00 BIC COBADEFFXXX") == ("IBAN <IBAN> BIC COBADEFFXXX",
                                                                            Counter(iban=1))
    for bad in ["DE89 3704 0044 0532 0130 01", "GB83WEST12345698765432"]:
        assert not iban_valid(bad)
        assert redact(f"IBAN {bad}.") == (f"IBAN {bad}.", Counter())


@pytest.mark.parametrize("phone", ["+41 44 668 18 00", "(044) 668 18 00", "+1-202-555-0143", "044 668 18 00",
                                   "(202) 555-0143", "202-555-0143", "+44 (0)20 7946 0958", "+41446681800",
                                   "0041 44 668 18 00", "030-12345678"])
def test_phones_are_replaced(phone):
    text, counts = redact(f"Call {phone}, ask for Anna.")
    assert text == "Call <PHONE>, ask for Anna."
    assert counts == Counter(phone=1)


@pytest.mark.parametrize("text", [
    "Released 2024-11-29.", "Founded in 1999.", "Requires version 3.10.12 or later.",
    # ISBNs are never phones: ISBN-13 has no phone shape, an ISBN-10 after "ISBN" is kept
    "ISBN 978-3-16-148410-0", "ISBN-10: 0-306-40615-2", "ISBN 0-8044-2957-X",
    "Order 123456789012 shipped.", "Due 01-02-2024.", "Counts: 0 1 2 3 4 5 6 7 8 9.",
    "Budget 10 000 000 USD, pages 1000-2000.", "IBAN DE89 3704 0044 0532 0130 01",
])
def test_non_phones_are_kept(text):
    assert redact(text) == (text, Counter())


def test_kinds_select_what_is_redacted():
    text = "ana@example.org, 8.8.8.8, +41 44 668 18 00, GB82WEST12345698765432"
    assert redact(text, kinds=("phone",)) == ("ana@example.org, 8.8.8.8, <PHONE>, GB82WEST12345698765432",
                                              Counter(phone=1))
    with pytest.raises(RecipeError):
        redact(text, kinds=("ssn",))


def test_step_rewrites_counts_and_never_drops():
    step = PIIRedactor(kinds=("email", "ip", "iban", "phone"), ip_replacement="<IP>", source="s",
                       sink=QuarantineSink())
    records = [
        Record("a", "s", "Contact a@b.com or c@d.org from 8.8.8.8, tel +41 44 668 18 00."),
        Record("b", "s", "Nothing to see here in 1999."),
        Record("c", "s", "Pay GB82WEST12345698765432, call (044) 668 18 00.", meta={"url": "u"}),
    ]
    out = list(step.run(records))
    assert [r.id for r in out] == ["a", "b", "c"]
    assert out[0].text == "Contact email@example.com or email@example.com from <IP>, tel <PHONE>."
    assert out[0].meta == {"pii": {"email": 2, "ip": 1, "phone": 1}}
    assert out[1].text == "Nothing to see here in 1999." and out[1].meta == {}
    assert out[2].meta == {"url": "u", "pii": {"iban": 1, "phone": 1}}
    assert step.replaced == Counter(email=2, ip=1, phone=2, iban=1)
    assert step.name == "pii" and step.source == "s"
    assert step.stats.records_in == step.stats.records_out == 3 and step.stats.balanced()


def test_replaced_is_reported_in_step_stats_notes_when_available():
    step = PIIRedactor()
    list(step.run([Record("a", "s", "mail x@y.com")]))
    assert step.replaced == Counter(email=1)
    if hasattr(step.stats, "notes"):
        assert step.stats.notes is step.replaced
        assert step.stats.to_json()["notes"] == {"email": 1}
