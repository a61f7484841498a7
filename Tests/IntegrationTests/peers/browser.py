"""Drives headless Chromium over the DevTools protocol, for tests of pages in a real browser.

    browser.py [--timeout SECS] [--insecure] URL EXPRESSION...

Starts chromium (CHROMIUM, else chromium / chromium-browser / google-chrome on PATH) with a
temporary profile and --remote-debugging-port=0, reads the port from the profile's
DevToolsActivePort, opens URL in a new tab and waits for its load event, then evaluates
each EXPRESSION in the page in turn (Runtime.evaluate with awaitPromise: an expression may
be a Promise) and prints one JSON line per expression: {"value": ...} (returnByValue), or
{"error": "..."} for a thrown exception or rejected promise. Page console messages and
uncaught exceptions go to stderr as "console: ..." lines. Chromium and its children (one
process group) are killed and the profile removed at the end, whatever happens; the
whole run is bounded by --timeout (default 60 s). --insecure: accept any TLS certificate
(--ignore-certificate-errors, for wss:// with the tests' own CA).

Exit status: 0 when every expression gave a value, 1 when one failed (the rest are still
run), 2 on a usage error, 3 when the browser could not be started or the page not loaded,
77 when no chromium is installed (a test skips on it).
"""
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time


def find_chromium():
    for name in [os.environ.get("CHROMIUM"), "chromium", "chromium-browser", "google-chrome"]:
        if name and shutil.which(name):
            return shutil.which(name)
    return None


class DevTools:
    """One browser-level WebSocket; commands to a tab go with its flat sessionId."""

    def __init__(self, ws, deadline):
        self.deadline = deadline
        self.ws = ws
        self.next_id = 0
        self.events = []

    def left(self):
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("the browser's time is up")
        return left

    def receive(self):
        message = json.loads(self.ws.recv(timeout=self.left()))
        if message.get("method") == "Runtime.consoleAPICalled":
            args = [a.get("value", a.get("description", "")) for a in message["params"].get("args", [])]
            print("console:", *args, file=sys.stderr, flush=True)
        elif message.get("method") == "Runtime.exceptionThrown":
            print("console: uncaught", message["params"]["exceptionDetails"].get("text"), file=sys.stderr, flush=True)
        return message

    def call(self, method, params=None, session=None):
        self.next_id += 1
        request = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            request["sessionId"] = session
        self.ws.send(json.dumps(request))
        while True:
            message = self.receive()
            if message.get("id") == self.next_id:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error'].get('message')}")
                return message.get("result", {})
            if "method" in message:
                self.events.append(message)

    def wait_event(self, method, session):
        while True:
            for i, event in enumerate(self.events):
                if event["method"] == method and event.get("sessionId") == session:
                    return self.events.pop(i)
            message = self.receive()
            if "method" in message:
                self.events.append(message)


def start(chromium, profile, deadline, insecure=False):
    process = subprocess.Popen(
        [chromium] + (["--ignore-certificate-errors"] if insecure else [])
        + ["--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run", "--no-default-browser-check",
           "--disable-background-networking", "--disable-extensions", "--remote-debugging-port=0",
           f"--user-data-dir={profile}", "about:blank"],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    active = os.path.join(profile, "DevToolsActivePort")
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"chromium exited with status {process.returncode}")
        try:
            with open(active) as f:
                lines = f.read().split("\n")
            if len(lines) >= 2 and lines[1]:
                return process, f"ws://127.0.0.1:{lines[0]}{lines[1]}"
        except FileNotFoundError:
            pass
        time.sleep(0.05)
    raise TimeoutError("chromium wrote no DevToolsActivePort")


def run(url, expressions, timeout, insecure=False):
    chromium = find_chromium()
    if not chromium:
        print("chromium is not installed (scripts/setup installs it)", file=sys.stderr)
        return 77
    deadline = time.monotonic() + timeout
    profile = tempfile.mkdtemp(prefix="wspipe-chromium-")
    process = None
    status = 0
    stack = contextlib.ExitStack()
    try:
        try:
            from websockets.sync.client import connect
            process, browser_url = start(chromium, profile, deadline, insecure)
            tools = DevTools(stack.enter_context(connect(browser_url, max_size=None, open_timeout=max(1, deadline - time.monotonic()))),
                             deadline)
            target = tools.call("Target.createTarget", {"url": "about:blank"})["targetId"]
            session = tools.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
            tools.call("Page.enable", session=session)
            tools.call("Runtime.enable", session=session)
            navigated = tools.call("Page.navigate", {"url": url}, session=session)
            if navigated.get("errorText"):
                raise RuntimeError(f"navigating to {url}: {navigated['errorText']}")
            tools.wait_event("Page.loadEventFired", session)
        except Exception as error:  # noqa: BLE001 - every failure to start is status 3
            print(f"browser: {type(error).__name__}: {error}", file=sys.stderr, flush=True)
            return 3
        for expression in expressions:
            try:
                result = tools.call("Runtime.evaluate", {"expression": expression, "awaitPromise": True, "returnByValue": True,
                                                         "timeout": int(tools.left() * 1000)}, session=session)
            except Exception as error:  # noqa: BLE001
                print(json.dumps({"error": f"{type(error).__name__}: {error}"}), flush=True)
                status = 1
                continue
            if "exceptionDetails" in result:
                details = result["exceptionDetails"]
                text = details.get("exception", {}).get("description") or details.get("exception", {}).get("value") or details.get("text")
                print(json.dumps({"error": str(text)}), flush=True)
                status = 1
            else:
                print(json.dumps({"value": result["result"].get("value")}), flush=True)
        return status
    finally:
        try:
            stack.close()
        except Exception:  # noqa: BLE001 - the browser is killed next anyway
            pass
        if process is not None:
            try:
                os.killpg(process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            process.wait(timeout=10)
        shutil.rmtree(profile, ignore_errors=True)


def main(argv):
    timeout = 60.0
    insecure = False
    while argv and argv[0] in ("--timeout", "--insecure"):
        if argv[0] == "--insecure":
            insecure, argv = True, argv[1:]
        elif len(argv) >= 2:
            timeout, argv = float(argv[1]), argv[2:]
        else:
            break
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    # A hard bound beyond the protocol's own: SIGALRM ends a hung run (the finally kills chromium).
    signal.signal(signal.SIGALRM, lambda *_: (_ for _ in ()).throw(TimeoutError("browser.py ran out of time")))
    signal.alarm(int(timeout) + 15)
    return run(argv[0], argv[1:], timeout, insecure)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
