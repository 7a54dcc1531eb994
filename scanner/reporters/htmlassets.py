"""The HTML report's one style sheet and one script, and the CSP that admits only them.

Both are constants of poolgate, never built from the input; the Content-Security-Policy
names each by its SHA-256 (``'sha256-...'``), so the browser runs that script and
applies that style sheet and nothing else: no other script, no inline style
attribute, no request of any kind (``default-src 'none'``). An escape that were ever
missed could put markup on the page, but not make it run or fetch anything.

The script only filters the findings already on the page (level, rule, namespace,
drift, text) and opens or closes their groups; without it the page is complete, with
every finding listed and the filter bar hidden.
"""

from __future__ import annotations

import base64
import hashlib
from importlib import resources
from typing import Final

STYLE: Final = """
:root{--error:#cf222e;--warning:#bf8700;--note:#0969da;--rule-error:#8250df;
--suppressed:#8c959f;--ok:#1a7f37;--line:#d0d7de;--soft:#f6f8fa;--muted:#57606a}
*{box-sizing:border-box}
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:0;color:#1f2328;
background:#fff}
main,header.top>div{max-width:92rem;margin:0 auto;padding:0 2rem}
header.top{background:#24292f;color:#f6f8fa;padding:1rem 0 1.1rem}
header.top h1{font-size:1.35rem;margin:0 0 .2rem}
header.top .verdict{font-size:1.05rem;margin:.2rem 0 .8rem;font-weight:600}
header.top code{color:#f6f8fa}
dl.meta{display:grid;grid-template-columns:repeat(auto-fit,minmax(17rem,1fr));gap:.4rem 2rem;
margin:0}
dl.meta div{min-width:0}dl.meta dt{font-size:11px;text-transform:uppercase;
letter-spacing:.05em;color:#afb8c1}dl.meta dd{margin:0;overflow-wrap:anywhere}
nav.toc{position:sticky;top:0;z-index:2;background:#fff;border-bottom:1px solid var(--line)}
nav.toc ul{list-style:none;display:flex;flex-wrap:wrap;gap:1.2rem;max-width:92rem;margin:0 auto;
padding:.45rem 2rem}
nav.toc a{color:#0969da;text-decoration:none}
h2{font-size:1.2rem;margin:2rem 0 .6rem;padding-bottom:.25rem;border-bottom:1px solid var(--line)}
h3{font-size:1rem;margin:0}
code,pre{font:12.5px/1.4 ui-monospace,SFMono-Regular,Menlo,monospace}
code{overflow-wrap:anywhere}pre{background:var(--soft);padding:.6rem .8rem;overflow:auto}
code,td,li,p,h3,dd,summary,text{unicode-bidi:isolate}
a{color:#0969da}.muted{color:var(--muted)}
.banner{padding:.6rem 1rem;border-left:4px solid var(--rule-error);background:#fbefff;
margin:1rem 0}
dl.tiles{display:grid;grid-template-columns:repeat(auto-fill,minmax(8.5rem,1fr));gap:.6rem;
margin:0}
dl.tiles div{border:1px solid var(--line);border-radius:6px;padding:.45rem .7rem;
border-top:4px solid var(--line)}
dl.tiles dt{color:var(--muted);font-size:12px}dl.tiles dd{margin:0;font-size:1.5rem;
font-weight:600}
dl.tiles .t-error{border-top-color:var(--error)}dl.tiles .t-warning{border-top-color:var(--warning)}
dl.tiles .t-note{border-top-color:var(--note)}
dl.tiles .t-rule-error{border-top-color:var(--rule-error)}
.charts{display:grid;grid-template-columns:repeat(auto-fit,minmax(24rem,1fr));gap:1rem;
margin-top:1rem}
figure.chart{margin:0;border:1px solid var(--line);border-radius:6px;padding:.6rem .8rem}
figure.chart figcaption{font-weight:600;margin-bottom:.3rem}
figure.chart svg{width:100%;height:auto;display:block}
figure.chart .ring{display:flex;gap:1.2rem;align-items:center}
figure.chart .ring svg{width:150px;height:150px;flex:none}
figure.chart .ring ul.legend{flex-direction:column}
svg text{font:12px system-ui,sans-serif;fill:#1f2328}svg text.c{fill:var(--muted)}
svg text.big{font-size:9px;font-weight:600}svg text.mid{font-size:6px;font-weight:600}
svg text.small{font-size:4px;fill:var(--muted)}
.f-error{fill:var(--error)}.f-warning{fill:var(--warning)}.f-note{fill:var(--note)}
.f-rule-error{fill:var(--rule-error)}.f-suppressed{fill:var(--suppressed)}
.f-clean{fill:#8fd19e}.f-track{fill:var(--soft)}
.s-error{stroke:var(--error)}.s-warning{stroke:var(--warning)}.s-note{stroke:var(--note)}
.s-rule-error{stroke:var(--rule-error)}.s-track{stroke:var(--soft)}
ul.legend{list-style:none;padding:0;margin:.3rem 0 0;display:flex;flex-wrap:wrap;gap:.3rem 1rem}
.key{display:inline-block;width:.7rem;height:.7rem;border-radius:2px;margin-right:.3rem;
vertical-align:-1px;background:var(--line)}
.k-error{background:var(--error)}.k-warning{background:var(--warning)}
.k-note{background:var(--note)}.k-rule-error{background:var(--rule-error)}
.k-clean{background:#8fd19e}
.level{display:inline-block;padding:0 .45rem;border-radius:.7rem;font-size:12px;
font-weight:600;color:#fff;background:var(--muted);white-space:nowrap}
.level-error{background:var(--error)}.level-warning{background:#9a6700}
.level-note{background:var(--note)}.level-rule-error{background:var(--rule-error)}
.level-suppressed{background:var(--suppressed)}
.drift{display:inline-block;padding:0 .4rem;font-size:12px;border:1px solid var(--muted);
border-radius:.7rem;white-space:nowrap}.drift-new{border-color:var(--error);color:var(--error)}
.drift-resolved{border-color:var(--ok);color:var(--ok)}
.pools{display:grid;grid-template-columns:repeat(auto-fill,minmax(21rem,1fr));gap:.8rem}
article.pool{border:1px solid var(--line);border-radius:6px;padding:.7rem .9rem;
border-left:5px solid var(--ok)}
article.pool.p-warning{border-left-color:var(--warning)}
article.pool.p-error{border-left-color:var(--error)}
article.pool.p-note{border-left-color:var(--note)}
article.pool.p-rule-error{border-left-color:var(--rule-error)}
article.pool>div{display:flex;justify-content:space-between;gap:.5rem;align-items:baseline}
.mode{font-size:12px;padding:0 .45rem;border-radius:.7rem;background:#ddf4ff;color:#0550ae;
white-space:nowrap}.mode.shared{background:#fff8c5;color:#7d4e00}
article.pool dl{display:grid;grid-template-columns:auto 1fr;gap:.15rem .8rem;margin:.5rem 0}
article.pool dt{color:var(--muted)}article.pool dd{margin:0;overflow-wrap:anywhere}
article.pool svg{display:block;margin:.4rem 0;max-width:100%;height:auto}
.td{display:inline-block;font-size:12px;padding:0 .4rem;border-radius:.6rem;
background:#eaeef2;margin:0 .15rem .15rem 0}
.alert{color:var(--error);font-weight:600;margin:.3rem 0}
table{border-collapse:collapse;width:100%}th,td{text-align:left;vertical-align:top;
padding:.3rem .5rem;border-bottom:1px solid #eaeef2}th{font-size:12px;color:var(--muted)}
td.r{white-space:nowrap;width:1%}td.r .rn{display:block;font-size:11.5px;color:var(--muted)}
td.w{width:28%}td.l{width:1%;white-space:nowrap}
tr.suppressed{color:var(--muted)}.justification{font-style:italic}
.filters{display:flex;flex-wrap:wrap;gap:.5rem 1.2rem;align-items:center;padding:.6rem .8rem;
background:var(--soft);border:1px solid var(--line);border-radius:6px;margin:.6rem 0;
position:sticky;top:2.1rem;z-index:1}
.filters[hidden]{display:none}
.filters fieldset{border:0;padding:0;margin:0;display:flex;gap:.6rem;align-items:center}
.filters legend{float:left;margin-right:.3rem;color:var(--muted)}
.filters label{white-space:nowrap}.filters input[type=search]{width:16rem}
.filters output{color:var(--muted);margin-left:auto}
details.obj{border:1px solid var(--line);border-radius:6px;margin:.5rem 0}
details.obj>summary{cursor:pointer;padding:.45rem .7rem;background:var(--soft);
border-radius:6px;list-style-position:inside}
details.obj[open]>summary{border-bottom:1px solid var(--line);border-radius:6px 6px 0 0}
details.obj .n{float:right;color:var(--muted)}
.rows{overflow-x:auto}.rows table{margin:0;min-width:40rem}
section.rule{border-top:1px solid #eaeef2;padding:.4rem 0}section.rule h3{margin:.6rem 0 .2rem}
p.quiet{color:var(--muted)}
@media print{nav.toc,.filters{display:none}header.top{background:none;color:inherit}
header.top code{color:inherit}dl.meta dt{color:var(--muted)}}
""".strip()

SCRIPT: Final = (resources.files("scanner.reporters") / "report.js").read_text("utf-8").strip()
"""The filter bar's script: a file of its own (``report.js``), so it reads and lints as
JavaScript."""


def _digest(source: str) -> str:
    return base64.b64encode(hashlib.sha256(source.encode("utf-8")).digest()).decode("ascii")


CSP: Final = (
    "default-src 'none'; "
    f"style-src 'sha256-{_digest(STYLE)}'; "
    f"script-src 'sha256-{_digest(SCRIPT)}'; "
    "base-uri 'none'; form-action 'none'"
)
"""The page's Content-Security-Policy: nothing but this style sheet and this script."""
