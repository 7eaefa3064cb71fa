"""Opens a tfm-attnviz page in headless Chromium and checks it from the DOM.

  attnviz_page.py PAGE.html WEIGHTS.json SCREENSHOT.png

WEIGHTS.json is `tfm-attnviz --json` for the page's sentences (one object a
line). Chromium runs with --headless --no-sandbox --disable-gpu and is
driven over the DevTools protocol on a pipe (--remote-debugging-pipe: JSON
messages ending in NUL, commands on fd 3, answers and events on fd 4), so
nothing listens on the network. Checks: the tokens, layers and heads the
page shows; that choosing another layer, head, stack or sentence changes
what is drawn; that the lines drawn carry the weights of --json; that the
grid has every layer x head and a click on one opens its heat map; that the
page requests nothing but itself. Writes a screenshot. Exits 1 on the first
failed check, naming it.
"""
import base64
import fcntl
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import time


def fail(what):
    print(f"FAIL: {what}", file=sys.stderr)
    sys.exit(1)


class Browser:
    def __init__(self, profile):
        exe = shutil.which("chromium") or fail("chromium is not installed (make -f Makefile.data deps)")
        cmd_r, self.cmd_w = os.pipe()
        self.out_r, out_w = os.pipe()
        # Chromium's ends above 4, so that moving them onto 3 and 4 clobbers nothing.
        for end in ("cmd_r", "out_w"):
            fd = locals()[end]
            high = fcntl.fcntl(fd, fcntl.F_DUPFD, 10)
            os.close(fd)
            if end == "cmd_r":
                cmd_r = high
            else:
                out_w = high
        args = ["--headless", "--no-sandbox", "--disable-gpu", "--remote-debugging-pipe",
                f"--user-data-dir={profile}", "--no-first-run", "--no-default-browser-check",
                "--disable-extensions", "--disable-background-networking", "--disable-component-update",
                "--disable-sync", "--disable-default-apps", "--mute-audio", "about:blank"]
        # The pipe ends become fds 3 and 4 of chromium.
        script = f'exec "$0" "$@" 3<&{cmd_r} 4>&{out_w} {cmd_r}<&- {out_w}>&-'
        self.proc = subprocess.Popen(["bash", "-c", script, exe, *args], pass_fds=(cmd_r, out_w),
                                     stdout=subprocess.DEVNULL, stderr=open(os.environ.get("CHROMIUM_LOG", os.devnull), "w"))
        os.close(cmd_r)
        os.close(out_w)
        self.buf = b""
        self.next_id = 0
        self.events = []

    def _message(self, deadline):
        while b"\0" not in self.buf:
            if time.time() > deadline:
                fail("chromium did not answer in time")
            chunk = os.read(self.out_r, 1 << 16)
            if not chunk:
                fail("chromium closed the DevTools pipe")
            self.buf += chunk
        raw, self.buf = self.buf.split(b"\0", 1)
        return json.loads(raw)

    def call(self, method, params=None, session=None, timeout=60):
        self.next_id += 1
        msg = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self.cmd_w, json.dumps(msg).encode() + b"\0")
        deadline = time.time() + timeout
        while True:
            m = self._message(deadline)
            if m.get("id") == self.next_id:
                if "error" in m:
                    fail(f"{method}: {m['error']}")
                return m.get("result", {})
            self.events.append(m)

    def wait_event(self, method, timeout=60):
        deadline = time.time() + timeout
        while True:
            for i, e in enumerate(self.events):
                if e.get("method") == method:
                    return self.events.pop(i)
            self.events.append(self._message(deadline))

    def close(self):
        try:
            self.call("Browser.close", timeout=10)
        except SystemExit:
            pass
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def main():
    page, weights, shot = sys.argv[1:4]
    sentences = [json.loads(line) for line in open(weights, encoding="utf-8")]
    first = sentences[0]
    L, H = first["layers"], first["heads"]
    url = "file://" + os.path.abspath(page)
    with tempfile.TemporaryDirectory() as profile:
        b = Browser(profile)
        try:
            target = b.call("Target.createTarget", {"url": "about:blank"})["targetId"]
            s = b.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
            b.call("Network.enable", session=s)
            b.call("Page.enable", session=s)
            b.call("Emulation.setDeviceMetricsOverride",
                   {"width": 1200, "height": 800, "deviceScaleFactor": 1, "mobile": False}, session=s)
            b.call("Page.navigate", {"url": url}, session=s)
            b.wait_event("Page.loadEventFired")

            def js(expression):
                r = b.call("Runtime.evaluate", {"expression": expression, "returnByValue": True}, session=s)
                if "exceptionDetails" in r:
                    fail(f"page script error in {expression!r}: {r['exceptionDetails']}")
                return r["result"].get("value")

            def choose(selector, value):  # as a user would: set the control, fire its change event
                js(f"(() => {{ const e = document.querySelector({json.dumps(selector)}); e.value = {json.dumps(str(value))};"
                   " e.dispatchEvent(new Event('change')); })()")

            # What is drawn: every line's head, query, key and opacity.
            drawn = ("[...document.querySelectorAll('#view line')].map(l => [+l.parentNode.dataset.head,"
                     " +l.dataset.q, +l.dataset.k, +l.getAttribute('stroke-opacity')])")

            if js("document.body.dataset.ready") != "1":
                fail("the page's script did not finish")
            if js("document.querySelectorAll('#layer option').length") != L:
                fail(f"the layer menu does not offer the model's {L} layers")
            if js("document.querySelectorAll('#heads input').length") != H:
                fail(f"the head boxes are not the model's {H} heads")
            # The lines view draws every token inside its picture: none cut
            # off at the bottom, the top or a side.
            outside = js("(() => { const svg = document.getElementById('paper'); if (!svg) return 'no picture';"
                         " const r = svg.getBoundingClientRect(); const out = [];"
                         " for (const e of svg.querySelectorAll('text')) { const b = e.getBoundingClientRect();"
                         " if (b.top < r.top - 0.5 || b.bottom > r.bottom + 0.5 || b.left < r.left - 0.5"
                         " || b.right > r.right + 0.5) out.push(e.textContent); } return out; })()")
            if outside != []:
                fail(f"the lines view cuts off tokens: {outside}")
            S = len(first["source"])
            counts = js("[document.querySelectorAll('#view .tok.q').length, document.querySelectorAll('#view .tok.k').length]")
            if counts != [S, S]:
                fail(f"encoder self-attention shows {counts} query and key tokens, not {S} and {S}")
            pieces = js("[...document.querySelectorAll('#pair [data-role=source] .piece')].map(e => e.textContent)")
            if pieces != first["source"]:
                fail(f"the printed source {pieces} is not the pieces {first['source']}")
            view = js("Object.assign({}, document.getElementById('view').dataset)")
            if view["stack"] != "enc" or view["layer"] != str(L - 1) or view["heads"] != ",".join(map(str, range(H))):
                fail(f"the first view is not every head of the last layer of enc: {view}")

            # The lines carry the weights of --json (4 decimals), all of them from 0.01 up.
            def expected(sentence, stack, layer, heads):
                return sorted([h, i, j, round(w, 4)] for h in heads
                              for i, row in enumerate(sentence[stack][layer][h])
                              for j, w in enumerate(row) if round(w, 4) >= 0.01)
            before = sorted(js(drawn))
            if before != expected(first, "enc", L - 1, range(H)):
                fail("the lines drawn are not the weights of --json")

            # Another layer, another head set, another stack: other drawings.
            choose("#layer", 0)
            layer0 = sorted(js(drawn))
            if layer0 == before or layer0 != expected(first, "enc", 0, range(H)):
                fail("choosing layer 1 did not draw layer 1's weights")
            js("document.querySelector('#heads input[data-head=\"0\"]').click()")
            no_head0 = sorted(js(drawn))
            if any(x[0] == 0 for x in no_head0) or no_head0 != expected(first, "enc", 0, range(1, H)):
                fail("unticking head 1 did not remove its lines alone")
            choose("#stack", "cross")
            T = len(first["target"])
            counts = js("[document.querySelectorAll('#view .tok.q').length, document.querySelectorAll('#view .tok.k').length]")
            if counts != [T, S]:
                fail(f"encoder-decoder attention shows {counts} tokens, not {T} queries and {S} keys")
            if sorted(js(drawn)) != expected(first, "cross", 0, range(1, H)):
                fail("the encoder-decoder lines are not its --json weights")
            choose("#stack", "dec")
            dec = sorted(js(drawn))
            if any(k > q for _, q, k, _ in dec):
                fail("decoder self-attention draws a line to a later position")
            if dec != expected(first, "dec", 0, range(1, H)):
                fail("the decoder self-attention lines are not its --json weights")

            # Hovering a query token keeps its lines alone.
            js("document.querySelector('#view .tok.q[data-i=\"1\"]').dispatchEvent(new Event('mouseenter'))")
            shown = js("[...document.querySelectorAll('#view line')].filter(l => l.style.display !== 'none').map(l => +l.dataset.q)")
            if not shown or set(shown) != {1}:
                fail(f"hovering query 2 left the lines of queries {sorted(set(shown))}")
            js("document.querySelector('#view .tok.q[data-i=\"1\"]').dispatchEvent(new Event('mouseleave'))")

            # The grid: every layer x head; a click opens that head's heat map.
            js("document.querySelector('input[name=mode][value=grid]').click()")
            if js("document.querySelectorAll('#view svg.mini').length") != L * H:
                fail(f"the grid does not show {L} x {H} heads")
            js(f"document.querySelector('#view svg.mini[data-layer=\"{L - 1}\"][data-head=\"{H - 1}\"]')"
               ".dispatchEvent(new MouseEvent('click'))")
            view = js("Object.assign({}, document.getElementById('view').dataset)")
            if view["mode"] != "heatmap" or view["layer"] != str(L - 1) or view["heads"] != str(H - 1):
                fail(f"a click on the grid's last head did not open its heat map: {view}")
            cells = js("document.querySelectorAll('#view svg.heatmap rect.cell').length")
            want = sum(round(w, 4) >= 0.005 for row in first["dec"][L - 1][H - 1] for w in row)
            if cells != want:
                fail(f"the heat map has {cells} cells for {want} weights over 0.005")

            if len(sentences) > 1:
                if js("document.querySelectorAll('#sentence option').length") != len(sentences):
                    fail("the sentence menu does not list every sentence")
                choose("#sentence", 1)
                got = js("[...document.querySelectorAll('#pair [data-role=source] .piece')].map(e => e.textContent)")
                if got != sentences[1]["source"]:
                    fail("choosing sentence 2 did not show its source")

            # Back to the first view for the picture.
            b.call("Page.navigate", {"url": url}, session=s)
            b.wait_event("Page.loadEventFired")
            png = base64.b64decode(b.call("Page.captureScreenshot", {"format": "png"}, session=s)["data"])
            if png[:8] != b"\x89PNG\r\n\x1a\n" or struct.unpack(">II", png[16:24]) != (1200, 800):
                fail("the screenshot is not a 1200 x 800 PNG")
            with open(shot, "wb") as f:
                f.write(png)

            urls = {e["params"]["request"]["url"] for e in b.events if e.get("method") == "Network.requestWillBeSent"}
            if urls != {url}:
                fail(f"the page requested more than itself: {sorted(urls)}")
        finally:
            b.close()
    print(f"attnviz page: {L} layers x {H} heads, {len(sentences)} sentence(s) checked in chromium; {shot}")


main()
