"""A headless Chromium driven through the DevTools protocol, for tests that
look at a page as a person would: load it, type, press keys, read the DOM,
collect console errors, take a screenshot. Chromium comes from the system's
packages (scripts/test.sh installs it where missing); the protocol goes over
a WebSocket on 127.0.0.1 (websocket-client)."""

import base64
import json
import os
import shutil
import subprocess
import tempfile
import time
import urllib.request

import websocket

NAMES = ["chromium", "chromium-browser", "google-chrome", "google-chrome-stable"]


def find():
    """The Chromium executable, or None."""
    return next((p for p in map(shutil.which, NAMES) if p), None)


def stop(proc, timeout=10):
    """Ends a process started for a test: asked to stop, then killed."""
    proc.terminate()
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


class ProtocolError(Exception):
    pass


class Chromium:
    """One headless browser with one page."""

    def __init__(self, exe, width=1100, height=900, timeout=30):
        self.timeout = timeout
        self.profile = tempfile.mkdtemp(prefix="tablepin-chromium-")
        self.log = open(os.path.join(self.profile, "stderr.log"), "wb")
        self.proc = subprocess.Popen(
            [exe, "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
             "--no-default-browser-check", "--disable-extensions", "--disable-sync",
             "--disable-background-networking", "--disable-component-update",
             "--remote-debugging-address=127.0.0.1", "--remote-debugging-port=0",
             f"--user-data-dir={self.profile}", f"--window-size={width},{height}", "about:blank"],
            # Its own temporary files go into the profile, removed at close.
            stdout=subprocess.DEVNULL, stderr=self.log, env={**os.environ, "TMPDIR": self.profile})
        self.events = []
        self.next_id = 0
        try:
            self.ws = websocket.create_connection(self._page_socket(), timeout=timeout, suppress_origin=True)
        except Exception:
            self.close()
            raise

    def _page_socket(self):
        # Chromium writes the port it chose into the profile folder.
        port_file = os.path.join(self.profile, "DevToolsActivePort")
        deadline = time.time() + self.timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"chromium exited with {self.proc.returncode}: {self._stderr()}")
            if os.path.exists(port_file):
                lines = open(port_file).read().split()
                if lines:
                    port = int(lines[0])
                    targets = json.load(urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=5))
                    pages = [t for t in targets if t.get("type") == "page"]
                    if pages:
                        return pages[0]["webSocketDebuggerUrl"]
            time.sleep(0.1)
        raise RuntimeError(f"chromium did not open its DevTools port in {self.timeout} s: {self._stderr()}")

    def _stderr(self):
        self.log.flush()
        with open(self.log.name, "rb") as f:
            return f.read().decode(errors="replace")[-2000:]

    def send(self, method, **params):
        """Calls a protocol method and returns its result; events that
        arrive meanwhile are kept in `events`."""
        self.next_id += 1
        me = self.next_id
        self.ws.send(json.dumps({"id": me, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == me:
                if "error" in msg:
                    raise ProtocolError(f"{method}: {msg['error']}")
                return msg.get("result", {})
            if "method" in msg:
                self.events.append(msg)

    def wait_for(self, event):
        """Waits for an event (or finds it among those already kept)."""
        deadline = time.time() + self.timeout
        while time.time() < deadline:
            for e in self.events:
                if e["method"] == event:
                    self.events.remove(e)
                    return e
            msg = json.loads(self.ws.recv())
            if "method" in msg:
                self.events.append(msg)
        raise TimeoutError(event)

    def open(self, url):
        for domain in ["Page", "Runtime", "Log", "Network"]:
            self.send(f"{domain}.enable")
        self.send("Page.navigate", url=url)
        self.wait_for("Page.loadEventFired")

    def evaluate(self, expression):
        """The value of a JavaScript expression in the page."""
        r = self.send("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in r:
            raise ProtocolError(f"{expression!r} threw: {r['exceptionDetails']}")
        return r["result"].get("value")

    def wait_until(self, expression, timeout=None):
        """Waits until a JavaScript expression is truthy in the page (a
        page that draws what it fetched); its value."""
        deadline = time.time() + (timeout or self.timeout)
        while True:
            value = self.evaluate(expression)
            if value:
                return value
            if time.time() > deadline:
                raise TimeoutError(f"{expression!r} stayed {value!r}")
            time.sleep(0.1)

    def requests(self):
        """The URL of every request the page has made so far."""
        self.evaluate("0")  # collects events sent before now
        return [e["params"]["request"]["url"] for e in self.events if e["method"] == "Network.requestWillBeSent"]

    def responses(self):
        """The URL and status of every response the page has had so far."""
        self.evaluate("0")
        return [{"url": e["params"]["response"]["url"], "status": e["params"]["response"]["status"]}
                for e in self.events if e["method"] == "Network.responseReceived"]

    def type(self, text):
        """Types text into the focused element, as a keyboard would."""
        self.send("Input.insertText", text=text)

    def press(self, key, code, key_code):
        """Presses and releases one key (e.g. "Enter", "Enter", 13)."""
        common = {"key": key, "code": code, "windowsVirtualKeyCode": key_code, "nativeVirtualKeyCode": key_code}
        text = {"Enter": "\r", " ": " "}.get(key)
        self.send("Input.dispatchKeyEvent", type="keyDown", **common, **({"text": text} if text else {}))
        self.send("Input.dispatchKeyEvent", type="keyUp", **common)

    def resize(self, width, height, mobile=False):
        self.send("Emulation.setDeviceMetricsOverride", width=width, height=height,
                  deviceScaleFactor=1, mobile=mobile)

    def screenshot(self, path):
        data = self.send("Page.captureScreenshot", format="png", captureBeyondViewport=True)["data"]
        with open(path, "wb") as f:
            f.write(base64.b64decode(data))

    def errors(self):
        """Console errors and uncaught exceptions seen so far."""
        self.evaluate("0")  # collects events sent before now
        out = []
        for e in self.events:
            p = e.get("params", {})
            if e["method"] == "Runtime.exceptionThrown":
                out.append(p["exceptionDetails"].get("exception", {}).get("description") or p["exceptionDetails"]["text"])
            elif e["method"] == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
                out.append(" ".join(str(a.get("value", a.get("description"))) for a in p.get("args", [])))
            elif e["method"] == "Log.entryAdded" and p["entry"].get("level") == "error":
                out.append(p["entry"].get("text"))
        return out

    def close(self):
        try:
            if getattr(self, "ws", None):
                self.ws.close()
        finally:
            stop(self.proc)
            self.log.close()
            shutil.rmtree(self.profile, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
