#!/usr/bin/env python3
"""Draws one trace, as Jaeger's query API returns it (/api/traces/ID on stdin), as an HTML
timeline page: the span's bar, its events (sidecar and node) at their times, and its tags.
scripts/jaeger-screenshot.sh uses it when no built jaeger-ui is at hand. Usage:
    curl -s http://127.0.0.1:16686/api/traces/ID | python3 jaeger-trace-html.py SOURCE_URL > trace.html
"""
import html
import json
import sys

source = sys.argv[1] if len(sys.argv) > 1 else "Jaeger query API"
trace = json.load(sys.stdin)["data"][0]
span = trace["spans"][0]
service = trace["processes"][span["processID"]]["serviceName"]
start, dur = span["startTime"], max(span["duration"], 1)
esc = html.escape


def field(log, key):
    for f in log["fields"]:
        if f["key"] == key:
            return f["value"]
    return ""


rows = []
for log in sorted(span["logs"], key=lambda l: l["timestamp"]):
    at = log["timestamp"] - start
    src = field(log, "source")
    left = min(max(at / dur * 100, 0), 100)
    rows.append(
        f'<tr><td class="t">{at} µs</td><td class="src {esc(src)}">{esc(src)}</td><td>{esc(field(log, "event"))}</td>'
        f'<td class="lane"><div class="tick {esc(src)}" style="left:{left:.2f}%"></div></td></tr>'
    )
tags = "".join(
    f'<tr><td class="k">{esc(t["key"])}</td><td>{esc(str(t["value"]))}</td></tr>'
    for t in sorted(span["tags"], key=lambda t: (not t["key"].startswith(("db.", "server.", "network.", "cassandra.")), t["key"]))
)
print(f"""<!doctype html><meta charset="utf-8"><title>{esc(span["operationName"])}</title>
<style>
body {{ font: 14px -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; margin: 0; color: #222; }}
header {{ background: #199; color: #fff; padding: 10px 18px; }}
header h1 {{ font-size: 20px; margin: 0; }} header span {{ opacity: .85; margin-right: 18px; }}
main {{ padding: 12px 18px; }}
.bar {{ height: 22px; background: #17b8be; border-radius: 2px; color: #fff; padding-left: 6px; line-height: 22px; }}
table {{ border-collapse: collapse; width: 100%; margin-top: 10px; }}
td {{ border-bottom: 1px solid #e6e6e6; padding: 4px 6px; vertical-align: middle; }}
td.t {{ width: 90px; text-align: right; color: #555; }} td.src {{ width: 70px; font-weight: 600; }}
.sidecar {{ color: #0a7; }} .node {{ color: #c50; }}
td.lane {{ position: relative; width: 45%; }}
.tick {{ position: absolute; top: 3px; width: 3px; height: 16px; }} .tick.sidecar {{ background: #0a7; }} .tick.node {{ background: #c50; }}
td.k {{ width: 260px; color: #555; font-family: monospace; }}
h2 {{ font-size: 15px; margin: 18px 0 0; }} small {{ color: #777; }}
</style>
<header><h1>{esc(service)}: {esc(span["operationName"])}</h1>
<span>Trace {esc(trace["traceID"])}</span><span>Duration {dur} µs</span><span>Spans {len(trace["spans"])}</span></header>
<main><small>From {esc(source)}</small>
<div class="bar" style="width:100%">{esc(span["operationName"])} · {dur} µs</div>
<h2>Events ({len(rows)})</h2><table>{"".join(rows)}</table>
<h2>Tags</h2><table>{tags}</table></main>""")
