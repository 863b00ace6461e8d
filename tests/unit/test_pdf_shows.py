"""``pdf_shows``: the EIN read on the success page is looked for in the letter's text, in a
real PDF with compressed content streams (fpdf2, as the IRS stand-in writes its CP 575)."""

from __future__ import annotations

from fpdf import FPDF

from portalq.portals.flows.base import pdf_shows


def _pdf(line: str, compress: bool) -> bytes:
    pdf = FPDF()
    pdf.set_compression(compress)
    pdf.add_page()
    pdf.set_font("helvetica", size=12)
    pdf.cell(text=line)
    return bytes(pdf.output())


def test_the_ein_is_found_in_a_compressed_and_a_plain_letter():
    for compress in (True, False):
        data = _pdf("Employer Identification Number: 12-3456789", compress)
        assert data.startswith(b"%PDF-")
        assert (b"12-3456789" in data) is not compress  # compressed: only in a stream
        assert pdf_shows(data, "12-3456789")


def test_another_ein_or_none_is_not_found():
    data = _pdf("Employer Identification Number: 98-7654321", True)
    assert not pdf_shows(data, "12-3456789")
    assert not pdf_shows(b"%PDF-1.4\nstream\nnot zlib at all\nendstream", "12-3456789")
