# SPDX-License-Identifier: BSD-3-Clause
"""Opens an HTML file in headless Chromium over the DevTools protocol (python3-websocket) and
reports what a person would see go wrong: console errors, uncaught exceptions, failed loads,
and images that did not decode (naturalWidth 0). Takes a screenshot.

    python3 qa_browser.py REPORT.html SCREENSHOT.png     # exit 0 clean, 1 problems, 77 skip
"""

import base64
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request

SKIP = 77


def chromium():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


class Cdp:
    def __init__(self, url):
        import websocket
        self.ws = websocket.create_connection(url, timeout=60, suppress_origin=True)
        self.next_id = 0
        self.events = []

    def call(self, method, **params):
        self.next_id += 1
        mine = self.next_id
        self.ws.send(json.dumps({"id": mine, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == mine:
                if "error" in msg:
                    raise RuntimeError("%s: %s" % (method, msg["error"]))
                return msg.get("result", {})
            if "method" in msg:
                self.events.append(msg)

    def wait_for(self, method, timeout_s=60):
        deadline = time.time() + timeout_s
        for e in self.events:
            if e["method"] == method:
                return e
        while time.time() < deadline:
            msg = json.loads(self.ws.recv())
            if "method" in msg:
                self.events.append(msg)
                if msg["method"] == method:
                    return msg
        raise TimeoutError(method)


def check(html_path, screenshot, width=1400, height=1100):
    """{"errors": [...], "images": [...], "screenshot": path}; raises on a browser failure."""
    browser = chromium()
    profile = tempfile.mkdtemp(prefix="ex2d-qa-chromium-")
    proc = subprocess.Popen(
        [browser, "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
         "--disable-dev-shm-usage", "--remote-debugging-port=0", "--remote-allow-origins=*",
         "--user-data-dir=" + profile, "--window-size=%d,%d" % (width, height), "about:blank"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        port = None
        deadline = time.time() + 60
        while time.time() < deadline and port is None:
            line = proc.stderr.readline()
            if not line and proc.poll() is not None:
                raise RuntimeError("chromium exited %s before it listened" % proc.returncode)
            m = re.search(r"DevTools listening on ws://[^:]+:(\d+)/", line)
            if m:
                port = int(m.group(1))
        if port is None:
            raise RuntimeError("chromium did not open its DevTools port within 60 s")
        targets = json.load(urllib.request.urlopen("http://127.0.0.1:%d/json/list" % port))
        page = next(t for t in targets if t.get("type") == "page")
        cdp = Cdp(page["webSocketDebuggerUrl"])
        for domain in ("Page", "Runtime", "Log", "Network"):
            cdp.call(domain + ".enable")
        cdp.call("Page.navigate", url="file://" + os.path.abspath(html_path))
        cdp.wait_for("Page.loadEventFired", 120)
        decoded = cdp.call(
            "Runtime.evaluate", awaitPromise=True, returnByValue=True,
            expression="Promise.all(Array.from(document.images).map(i => i.decode().then("
                       "() => [i.alt, i.naturalWidth, i.naturalHeight, true], "
                       "() => [i.alt, i.naturalWidth, i.naturalHeight, false])))")
        images = decoded["result"]["value"]
        title = cdp.call("Runtime.evaluate", expression="document.title",
                         returnByValue=True)["result"]["value"]
        shot = cdp.call("Page.captureScreenshot", format="png")
        with open(screenshot, "wb") as out:
            out.write(base64.b64decode(shot["data"]))
        errors = []
        for e in cdp.events:
            p = e.get("params", {})
            if e["method"] == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
                errors.append("console.%s: %s" % (p["type"], " ".join(
                    str(a.get("value", a.get("description", ""))) for a in p.get("args", []))))
            elif e["method"] == "Runtime.exceptionThrown":
                errors.append("exception: %s" % p.get("exceptionDetails", {}).get("text"))
            elif e["method"] == "Log.entryAdded" and p.get("entry", {}).get("level") == "error":
                errors.append("log: %s" % p["entry"].get("text"))
            elif e["method"] == "Network.loadingFailed":
                errors.append("load failed: %s" % p.get("errorText"))
        cdp.ws.close()
        return {"errors": errors, "images": images, "title": title, "screenshot": screenshot}
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        shutil.rmtree(profile, ignore_errors=True)


def main(argv):
    if not chromium():
        print("SKIP: chromium is not installed (apt-get install chromium; .ci/install-deps "
              "--tests installs it)")
        return SKIP
    try:
        import websocket  # noqa: F401 (only whether it is there)
    except ImportError:
        print("SKIP: python3-websocket is not installed (.ci/install-deps --tests)")
        return SKIP
    result = check(argv[1], argv[2])
    bad = [i for i in result["images"] if not i[3] or i[1] <= 0]
    print("%s: title %r, %d image(s), %d undecoded, %d console error(s); screenshot %s" % (
        argv[1], result["title"], len(result["images"]), len(bad), len(result["errors"]),
        result["screenshot"]))
    for e in result["errors"]:
        print("  " + e)
    for i in bad:
        print("  image not decoded: %r" % (i,))
    return 1 if bad or result["errors"] or not result["images"] else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
