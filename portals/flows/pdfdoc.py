"""Small text PDFs the flows upload (a Delaware certificate, a CRTC registration letter).

Why hand-written and not fpdf2: fpdf2 is in the ``demo`` extra only (the stand-ins' PDFs);
the flows run from the base install, which has no PDF library. One page of Helvetica text
needs seven objects and a cross-reference table (PDF 1.4, ISO 32000 7.5), written
uncompressed so anyone can read what was filed. Text is latin-1 (WinAnsi): characters
outside it print as "?".
"""

from __future__ import annotations

from collections.abc import Sequence


def _escape(text: str) -> bytes:
    raw = text.encode("latin-1", "replace")
    return raw.replace(b"\\", b"\\\\").replace(b"(", b"\\(").replace(b")", b"\\)")


def _wrap(text: str, width: int = 88) -> list[str]:
    lines, line = [], ""
    for word in text.split():
        if line and len(line) + 1 + len(word) > width:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}" if line else word
    return [*lines, line] if line else lines


#: body lines a US-letter page holds below 72 pt margins at a 13 pt leading
LINES_PER_PAGE = 48


def make_pdf(heading: Sequence[str], body: Sequence[str], *, title: str) -> bytes:
    """US-letter pages: ``heading`` in bold on the first, then ``body`` paragraphs wrapped
    at 88 characters, a new page every :data:`LINES_PER_PAGE` lines (latin-1 text)."""
    lines: list[bytes | None] = []   # None: a paragraph's blank line
    for paragraph in body:
        lines += [_escape(line) for line in _wrap(paragraph)] + [None]
    first = max(1, LINES_PER_PAGE - 2 * len(heading) - 2)
    chunks = [lines[:first]] + [lines[i:i + LINES_PER_PAGE]
                                for i in range(first, len(lines), LINES_PER_PAGE)]
    streams = []
    for n, chunk in enumerate(chunks):
        ops = [b"BT", b"72 720 Td"]
        if n == 0:
            ops += [b"/F2 13 Tf", b"16 TL"] + [b"(" + _escape(h) + b") '" for h in heading]
            ops.append(b"T*")
        ops += [b"/F1 10 Tf", b"13 TL"]
        ops += [b"T*" if line is None else b"(" + line + b") '" for line in chunk]
        streams.append(b"\n".join([*ops, b"ET"]))
    pages = len(streams)
    # objects: 1 catalog, 2 pages, 3-4 fonts, 5 info, then a page and its content each
    kids = b" ".join(b"%d 0 R" % (6 + 2 * i) for i in range(pages))
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [" + kids + b"] /Count %d >>" % pages,
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica-Bold "
        b"/Encoding /WinAnsiEncoding >>",
        b"<< /Title (" + _escape(title) + b") /Producer (portalq) >>",
    ]
    for i, content in enumerate(streams):
        objects += [b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents %d 0 R "
                    b"/Resources << /Font << /F1 3 0 R /F2 4 0 R >> >> >>" % (7 + 2 * i),
                    b"<< /Length %d >>\nstream\n" % len(content) + content + b"\nendstream"]
    out = bytearray(b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n")
    offsets = []
    for number, obj in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + obj + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % o for o in offsets)
    out += (b"trailer\n<< /Size %d /Root 1 0 R /Info 5 0 R >>\nstartxref\n%d\n%%%%EOF\n"
            % (len(objects) + 1, xref))
    return bytes(out)
