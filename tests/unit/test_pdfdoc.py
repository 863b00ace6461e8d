"""The flows' hand-written PDFs (portals/flows/pdfdoc.py): structurally valid -- every
cross-reference entry points at its object, the page tree counts its pages, the text is
there as written (escaped), long text goes onto more pages."""

from __future__ import annotations

import re

from portalq.portals.flows.pdfdoc import LINES_PER_PAGE, make_pdf


def _check_xref(pdf: bytes) -> int:
    start = int(re.search(rb"startxref\n(\d+)\n%%EOF\n$", pdf).group(1))
    assert pdf[start:].startswith(b"xref\n0 ")
    count = int(pdf[start:].split(b"\n")[1].split()[1])
    entries = pdf[start:].split(b"\n")[3:3 + count - 1]
    for number, entry in enumerate(entries, start=1):
        offset = int(entry[:10])
        assert len(entry) + 1 == 20 and pdf[offset:].startswith(b"%d 0 obj\n" % number)
    return count - 1


def test_one_page_with_escaped_text():
    pdf = make_pdf(["HEADING"], ["Name (with parentheses) and a back\\slash."], title="t")
    assert pdf.startswith(b"%PDF-1.4\n") and _check_xref(pdf) == 7
    assert b"/Count 1" in pdf
    assert b"(Name \\(with parentheses\\) and a back\\\\slash.) '" in pdf


def test_long_text_goes_onto_more_pages():
    paragraphs = [f"Paragraph {i} " + "word " * 30 for i in range(60)]   # 2 lines + blank each
    pdf = make_pdf(["A"], paragraphs, title="t")
    pages = -(-(60 * 3 + 4) // LINES_PER_PAGE)
    assert b"/Count %d" % pages in pdf and _check_xref(pdf) == 5 + 2 * pages
    assert b"(Paragraph 59 word" in pdf
