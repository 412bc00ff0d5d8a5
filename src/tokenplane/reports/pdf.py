"""A document as a PDF (ReportLab's platypus: flowing paragraphs, tables, images)."""

from __future__ import annotations

import io
from html import escape
from pathlib import Path

from tokenplane.reports.document import Chart, Document, Heading, Para, Table


def render_pdf(doc: Document, path: Path) -> None:
    from reportlab.lib import colors
    from reportlab.lib.pagesizes import A4, landscape
    from reportlab.lib.styles import getSampleStyleSheet
    from reportlab.lib.units import cm
    from reportlab.platypus import (
        Flowable,
        Image,
        LongTable,
        Paragraph,
        SimpleDocTemplate,
        Spacer,
        TableStyle,
    )

    styles = getSampleStyleSheet()
    cell = styles["BodyText"].clone("cell", fontSize=7, leading=8.5)
    page = landscape(A4)
    frame_w = page[0] - 3 * cm
    # a chart takes at most a third of the page's height, so it stays on the page the
    # summary starts (at full width it took ~60% and left page 1 mostly white)
    chart_h = (page[1] - 3 * cm) / 3
    story: list[Flowable] = [Paragraph(escape(doc.title), styles["Title"]),
                           Paragraph(escape(doc.subtitle), styles["Italic"]), Spacer(1, 8)]
    for b in doc.blocks:
        if isinstance(b, Heading):
            story.append(Paragraph(escape(b.text), styles["Heading2" if b.level <= 2
                                                           else "Heading3"]))
        elif isinstance(b, Para):
            story.append(Paragraph(escape(b.text), styles["BodyText"]))
        elif isinstance(b, Table):
            data = [[Paragraph(f"<b>{escape(h)}</b>", cell) for h in b.headers]]
            data += [[Paragraph(escape(v), cell) for v in row] for row in b.rows]
            t = LongTable(data, repeatRows=1, hAlign="LEFT",
                          colWidths=[frame_w / max(1, len(b.headers))] * len(b.headers)
                          if len(b.headers) > 4 else None)
            t.setStyle(TableStyle([
                ("GRID", (0, 0), (-1, -1), 0.25, colors.grey),
                ("BACKGROUND", (0, 0), (-1, 0), colors.whitesmoke),
                ("VALIGN", (0, 0), (-1, -1), "TOP"),
            ]))
            story += [t, Spacer(1, 6)]
        elif isinstance(b, Chart):
            img = Image(io.BytesIO(b.png))
            scale = min(1.0, frame_w / img.drawWidth, chart_h / img.drawHeight)
            img.drawWidth *= scale
            img.drawHeight *= scale
            img.hAlign = "LEFT"
            story += [img, Paragraph(escape(b.caption), styles["Italic"])]
    SimpleDocTemplate(str(path), pagesize=page, title=doc.title, author="tokenplane",
                      leftMargin=1.5 * cm, rightMargin=1.5 * cm, topMargin=1.5 * cm,
                      bottomMargin=1.5 * cm).build(story)
