"""A document as one self-contained HTML file (inline CSS, charts as data: URIs)."""

from __future__ import annotations

import base64
from html import escape

from tokenplane.reports.document import Chart, Document, Heading, Para, Table

_CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,"Noto Sans",sans-serif;
margin:2rem auto;max-width:1100px;color:#1f2328;padding:0 1rem}
h1{font-size:1.6rem;margin-bottom:.2rem}.sub{color:#59636e;margin-top:0}
h2{font-size:1.15rem;margin-top:2rem;border-bottom:1px solid #d1d9e0;padding-bottom:.2rem}
table{border-collapse:collapse;font-size:.85rem;margin:.5rem 0}
th,td{border:1px solid #d1d9e0;padding:.25rem .5rem;text-align:left}
th{background:#f6f8fa}td.n{text-align:right;font-variant-numeric:tabular-nums}
img{max-width:100%}figcaption{color:#59636e;font-size:.8rem}
"""


def render_html(doc: Document) -> str:
    out = ["<!doctype html>", '<html lang="en"><head><meta charset="utf-8">',
           f"<title>{escape(doc.title)}</title><style>{_CSS}</style></head><body>",
           f"<h1>{escape(doc.title)}</h1>", f'<p class="sub">{escape(doc.subtitle)}</p>']
    for b in doc.blocks:
        if isinstance(b, Heading):
            out.append(f"<h{b.level}>{escape(b.text)}</h{b.level}>")
        elif isinstance(b, Para):
            out.append(f"<p>{escape(b.text)}</p>")
        elif isinstance(b, Table):
            out.append("<table><thead><tr>" + "".join(f"<th>{escape(h)}</th>"
                                                     for h in b.headers) + "</tr></thead><tbody>")
            for row in b.rows:
                cells = "".join(f'<td class="n">{escape(v)}</td>' if b.is_numeric(i)
                                else f"<td>{escape(v)}</td>" for i, v in enumerate(row))
                out.append(f"<tr>{cells}</tr>")
            out.append("</tbody></table>")
        elif isinstance(b, Chart):
            data = base64.b64encode(b.png).decode()
            out.append(f'<figure><img alt="{escape(b.caption)}" src="data:image/png;base64,'
                       f'{data}"><figcaption>{escape(b.caption)}</figcaption></figure>')
    out.append("</body></html>")
    return "\n".join(out)
