"""The small real PDFs (fpdf2) the stand-ins hand out: certificates, confirmation letters."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from starlette.responses import Response


def _latin1(text: str) -> str:
    return text.encode("latin-1", "replace").decode("latin-1")


def make_pdf(heading: Sequence[str], lines: Iterable[str], *, title: str | None = None,
             author: str | None = None, paper: str = "A4") -> bytes:
    """A one-document PDF: bold ``heading`` lines, then ``lines`` as body paragraphs."""
    # the demo extra (portalq[demo]): not installed with the base package
    from fpdf import FPDF

    pdf = FPDF(format=paper)
    pdf.set_title(_latin1(title or (heading[0] if heading else "document")))
    if author:
        pdf.set_author(_latin1(author))
    pdf.add_page()
    pdf.set_font("Helvetica", "B", 13)
    for line in heading:
        pdf.multi_cell(0, 7, _latin1(line), new_x="LMARGIN", new_y="NEXT")
    pdf.ln(4)
    pdf.set_font("Helvetica", "", 10)
    for line in lines:
        pdf.multi_cell(0, 5, _latin1(line), new_x="LMARGIN", new_y="NEXT")
        pdf.ln(1)
    return bytes(pdf.output())


def pdf_response(data: bytes, name: str, *, inline: bool = False) -> Response:
    disposition = "inline" if inline else "attachment"
    return Response(data, media_type="application/pdf",
                    headers={"Content-Disposition": f'{disposition}; filename="{name}"'})
