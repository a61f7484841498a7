"""Drives wspipe as a console (issue 36) in a pseudo-terminal of 80x24 and checks what is on
the screen with a terminal emulator (pyte), and what a WebSocket server run here (Python
websockets, in a thread) received. Not a peer: a helper of ConsoleTests.

    console.py --wspipe BIN SCENARIO

Exits 0 when the scenario holds; otherwise prints what failed and the screen, and exits 1.
"""
import argparse
import asyncio
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time

import pexpect
import pyte
from websockets.asyncio.server import serve
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

COLUMNS, ROWS = 80, 24
LEFT, RIGHT, HOME, END = "\x1b[D", "\x1b[C", "\x1b[H", "\x1b[F"


class Failed(Exception):
    pass


class Server:
    """A WebSocket server in a thread: records each connection's messages (type, bytes),
    pings and Close; echoes text messages with `echo`; `script(connection, message)` may
    answer a message otherwise; `greeting` messages are sent on connect."""

    def __init__(self, echo=False, greeting=(), on_message=None, process_request=None):
        self.echo = echo
        self.process_request = process_request
        self.greeting = list(greeting)
        self.on_message = on_message
        self.messages = []
        self.pings = []
        self.closes = []
        self.connections = []
        self.loop = asyncio.new_event_loop()
        ready = threading.Event()
        threading.Thread(target=self._run, args=(ready,), daemon=True).start()
        ready.wait(10)

    def _run(self, ready):
        asyncio.set_event_loop(self.loop)

        async def main():
            server = await serve(self._handle, "127.0.0.1", 0, compression=None, ping_interval=None,
                                 process_request=self.process_request)
            self.port = server.sockets[0].getsockname()[1]
            ready.set()
            await server.serve_forever()

        self.loop.run_until_complete(main())

    async def _handle(self, connection):
        self.connections.append(connection)
        for message in self.greeting:
            await connection.send(message)
        try:
            async for message in connection:
                self.messages.append(message)
                if self.on_message:
                    await self.on_message(connection, message)
                elif self.echo:
                    await connection.send(message)
        except ConnectionClosed:
            pass
        rcvd = connection.protocol.close_rcvd
        self.closes.append((rcvd.code, rcvd.reason) if rcvd else None)

    def run(self, coroutine):
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(10)

    @property
    def url(self):
        return "ws://127.0.0.1:%d/" % self.port

    def wait(self, predicate, what, timeout=10):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if predicate():
                return
            time.sleep(0.02)
        raise Failed("the server: %s (messages %r, closes %r)" % (what, self.messages, self.closes))


class Terminal:
    """A command in a pty, its output fed to pyte."""

    def __init__(self, command, args, env=None):
        environment = dict(os.environ)
        environment.update({"TERM": "xterm-256color", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8"})
        environment.pop("NO_COLOR", None)
        environment.setdefault("XDG_STATE_HOME", tempfile.mkdtemp())  # the console's history
        environment.update(env or {})
        self.screen = pyte.Screen(COLUMNS, ROWS)
        self.screen.set_mode(pyte.modes.LNM)
        self.stream = pyte.ByteStream(self.screen)
        self.raw = bytearray()
        self.child = pexpect.spawn(command, args, env=environment, dimensions=(ROWS, COLUMNS), timeout=10)

    def pump(self, timeout=0.05):
        try:
            data = self.child.read_nonblocking(65536, timeout=timeout)
        except pexpect.TIMEOUT:
            return False
        except pexpect.EOF:
            return None
        self.raw.extend(data)
        self.stream.feed(data)
        return True

    def lines(self):
        return [line.rstrip() for line in self.screen.display]

    def text(self):
        return "\n".join(self.lines())

    def wait_for(self, needle, timeout=10):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if (needle(self) if callable(needle) else needle in self.text()):
                return
            if self.pump(0.05) is None:
                break
        if callable(needle) and needle(self) or not callable(needle) and needle in self.text():
            return
        raise Failed("not on the screen: %r" % (needle,))

    def settle(self, seconds=0.3):
        deadline = time.time() + seconds
        while time.time() < deadline:
            self.pump(0.05)

    def type(self, text):
        self.child.send(text)

    def wait_exit(self, timeout=10):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.pump(0.05) is None:
                break
        self.child.expect(pexpect.EOF, timeout=max(0.1, deadline - time.time()))
        self.child.close()
        return self.child.exitstatus, self.child.signalstatus

    def cursor_line(self):
        return self.lines()[self.screen.cursor.y]


def check(condition, what):
    if not condition:
        raise Failed(what)


def wspipe_console(args, extra, env=None):
    return Terminal(args.wspipe, extra, env=env)


def open_console(args, server, *options, env=None):
    """A client console connected to `server`."""
    term = wspipe_console(args, list(options) + [server.url], env=env)
    term.wait_for("connected to")
    return term


def end_with_ctrl_d(term):
    term.type("\x04")
    return term.wait_exit()


# MARK: - Scenarios against a client console

def scenario_prompt(args):
    server = Server(echo=True)
    term = wspipe_console(args, [server.url])
    term.wait_for("connected to ws://127.0.0.1:%d/" % server.port)
    term.wait_for(lambda t: t.cursor_line() == ">")
    term.type("hello\r")
    term.wait_for("< hello")
    check("> hello" in term.lines(), "the line sent is shown after the prompt")
    term.type("\x04")
    status, signal_status = term.wait_exit()
    check(status == 0, "Ctrl-D ends with 0 (got %r %r)" % (status, signal_status))
    server.wait(lambda: server.closes == [(1000, "")], "a Close 1000")
    check(server.messages == ["hello"], "the server received %r" % server.messages)
    check("closed by us: 1000" in term.text(), "the closed line")


def scenario_editing(args):
    server = Server()
    term = open_console(args, server)
    term.type("ac" + LEFT + "b\r")
    server.wait(lambda: server.messages == ["abc"], "typing, Left and insert send the edited line")
    term.type("wrld" + HOME + RIGHT + RIGHT + RIGHT + "!" + END + "?" + LEFT + LEFT + "\x1b[3~" + "\r")
    server.wait(lambda: server.messages == ["abc", "wrl!?"], "Home, End, Delete")
    term.type("\x1b[200~pasted one\npasted two\nand typed\x1b[201~")
    server.wait(lambda: server.messages[2:] == ["pasted one", "pasted two"], "a paste of N lines is N messages")
    term.wait_for(lambda t: t.cursor_line() == "> and typed")
    term.type(" on\r")
    server.wait(lambda: server.messages[4:] == ["and typed on"], "the paste's unfinished line stays typed")
    end_with_ctrl_d(term)


def scenario_midline(args):
    async def later(connection, message):
        if message == "go":
            await asyncio.sleep(0.8)
            await connection.send('{"n":9}')
    server = Server(on_message=later)
    term = open_console(args, server)
    term.type("go\r")
    term.wait_for("> go")
    term.type("typing slowly")
    term.wait_for('< {"n":9}')
    term.settle(0.2)
    check(term.cursor_line() == "> typing slowly", "the typed line is drawn again, whole: %r" % term.cursor_line())
    check(term.screen.cursor.x == len("> typing slowly"), "the cursor after it (column %d)" % term.screen.cursor.x)
    lines = term.lines()
    check(lines.index('< {"n":9}') < lines.index("> typing slowly"), "the message above the line being typed")
    term.type(" here\r")
    server.wait(lambda: server.messages == ["go", "typing slowly here"], "the line went out whole")
    end_with_ctrl_d(term)


def scenario_commands(args):
    server = Server(echo=True)
    folder = tempfile.mkdtemp()
    blob = os.path.join(folder, "blob.bin")
    with open(blob, "wb") as handle:
        handle.write(bytes(range(40)))
    text = os.path.join(folder, "note.txt")
    with open(text, "w") as handle:
        handle.write("line one\nline two\n")
    term = open_console(args, server)
    term.type("/ping hello\r")
    term.wait_for(lambda t: re.search(r"pong hello: round trip [0-9.]+ ms", t.text()) is not None)
    term.type("/binary 01ff 02\r")
    server.wait(lambda: b"\x01\xff\x02" in server.messages, "/binary HEX sends the bytes")
    term.wait_for("< binary 3 bytes: 01 ff 02")
    check("binary message in text mode" not in term.text(), "the pipeline's binary warning in the console")
    term.type("/binary @%s\r" % blob)
    server.wait(lambda: bytes(range(40)) in server.messages, "/binary @FILE sends the file")
    term.wait_for("< binary 40 bytes: 00 01 02")
    term.type("/send @%s\r" % text)
    server.wait(lambda: "line one\nline two\n" in server.messages, "/send @FILE sends one text message")
    term.type("//slash\r")
    server.wait(lambda: "/slash" in server.messages, "// sends a leading /")
    term.type("/bogus\r")
    term.wait_for("unknown command /bogus")
    term.type("/json on\r")
    term.type('{"a":[1,2],"b":"x"}\r')
    term.wait_for('< {')
    term.wait_for('    "a": [')
    term.wait_for('  "b": "x"')
    term.type("/json off\r")
    term.type("/quiet\r")
    term.type("unseen\r")
    server.wait(lambda: "unseen" in server.messages, "sent while quiet")
    term.settle(0.3)
    check("< unseen" not in term.lines(), "/quiet hides received messages")
    term.type("/help\r")
    term.wait_for("/close [CODE [REASON]]")
    term.type("/close 4000 bye\r")
    status, _ = term.wait_exit()
    server.wait(lambda: server.closes == [(4000, "bye")], "/close 4000 bye")
    check(server.messages[0] == b"\x01\xff\x02" and isinstance(server.messages[0], bytes), "binary, not text")
    check(status == 0, "exit status after /close 4000 (got %r)" % status)


def scenario_escapes(args):
    hostile = "evil\x1b]0;pwned\x07\x1b[2J\x1b]52;c;aGk=\x07\x1b[1;1Hend\u202egnp.exe"
    server = Server(on_message=lambda connection, message: connection.send(hostile))
    term = open_console(args, server)
    title = term.screen.title
    term.type("first line\r")
    term.wait_for("< evil")
    term.settle(0.2)
    text = term.text()
    check(term.screen.title == title, "the window title changed to %r" % term.screen.title)
    check("connected to" in text and "> first line" in text, "earlier lines were erased")
    check("\\x1B]0;pwned\\x07\\x1B[2J\\x1B]52;c;aGk=\\x07\\x1B[1;1Hend\\u{202E}gnp.exe" in text,
          "the escapes shown visibly")
    end_with_ctrl_d(term)


def scenario_wide(args):
    server = Server()
    term = open_console(args, server)
    cjk = "漢字かな交じり文" * 6  # 48 wide characters: 96 columns
    term.type(cjk)
    term.settle(0.3)
    row = term.screen.cursor.y
    lines = term.lines()
    first, second = lines[row - 1], lines[row]
    check(first.startswith("> 漢字") and second.endswith("り文"), "the CJK line wraps: %r / %r" % (first, second))
    term.type("\r")
    server.wait(lambda: server.messages == [cjk], "the CJK line sent")
    long = "".join(chr(ord("a") + i % 26) for i in range(300))
    term.type(long)
    term.settle(0.3)
    row = term.screen.cursor.y
    drawn = "".join(term.lines()[row - 3:row + 1])
    check(drawn == "> " + long, "the 300-column line over four rows: %r" % drawn)
    check(term.screen.cursor.x == (302 % 80), "the cursor at its end")
    term.type(HOME)
    term.settle(0.2)
    check(term.screen.cursor.y == row - 3 and term.screen.cursor.x == 2, "Home goes to its start")
    term.type("\r")
    server.wait(lambda: server.messages == [cjk, long], "the long line sent")
    end_with_ctrl_d(term)


def scenario_tall(args):
    """A pasted line taller than the screen (3,000 columns, 38 rows of 80 in 24): the edit
    rows are a screenful around the cursor, so Home shows the prompt (the cursor could not
    go up to rows scrolled off), and Enter leaves the line shown above the next prompt (a
    clear from above the screen's top erased it all)."""
    server = Server()
    term = open_console(args, server)
    long = "".join(chr(ord("a") + i % 26) for i in range(3000))
    term.type("\x1b[200~" + long + "\x1b[201~")
    term.wait_for(lambda t: t.screen.cursor.x == 3002 % 80 and t.cursor_line().endswith(long[-(3002 % 80):]))
    term.type("X")
    term.wait_for(lambda t: t.cursor_line().endswith("X"))
    term.type(HOME)
    term.wait_for(lambda t: (t.screen.cursor.x, t.cursor_line()) == (2, "> " + long[:78]))
    top = term.screen.cursor.y
    check(top <= 1, "the window's first row near the top (row %d)" % top)
    term.type(END)
    term.wait_for(lambda t: t.cursor_line().endswith("X") and t.screen.cursor.y == top + ROWS - 2)
    lines = term.lines()
    shown = "".join(lines[top:top + ROWS - 1])
    check(shown == ("> " + long + "X")[-(ROWS - 2) * 80 - 3003 % 80:], "the last screenful of the line: %r" % lines)
    term.type("\r")
    server.wait(lambda: server.messages == [long + "X"], "the line sent")
    term.wait_for(lambda t: t.cursor_line() == ">")
    term.settle(0.2)
    above = term.lines()[term.screen.cursor.y - 1]
    check(above == ("> " + long + "X")[-(3003 % 80):], "the line sent, above the prompt: %r" % above)
    end_with_ctrl_d(term)


def scenario_reconnect(args):
    server = Server(echo=True)
    term = wspipe_console(args, ["--reconnect", "--retry-delay", "0.3", "--send", "hi", server.url])
    term.wait_for("< hi")
    term.type("one\r")
    term.wait_for("< one")
    # "connected to" is the client's side: the server may not have its handler yet.
    server.wait(lambda: server.connections, "a connection")
    server.run(server.connections[0].close(1012, "restart"))
    term.wait_for("closed by the server: 1012 restart")
    term.wait_for(lambda t: re.search(r"^connected to ws://\S+ again after [0-9.]+ s \(attempt 2\)$", t.text(), re.M))
    term.type("two\r")
    term.wait_for("< two")
    check(server.messages == ["hi", "one", "hi", "two"], "--send on each connection, then the typed lines: %r" % server.messages)
    term.type("\x04")
    status, _ = term.wait_exit()
    check(status == 0, "exit status %r" % status)


def scenario_reconnect_status(args):
    """While --reconnect waits and dials, a status row above the prompt counts the wait down
    and says what happens to lines entered meanwhile; the line being typed stays whole under
    it, and once connected again the row goes, the queued line is sent, then the typed one."""
    attempts = []

    def busy_once(connection, request):
        """The attempt after the drop is refused with 503 and Retry-After: 3 (the backoff's
        own wait is random: full jitter), so the next one waits 3 s."""
        attempts.append(request.path)
        if len(attempts) == 2:
            response = connection.respond(503, "restarting\n")
            response.headers["Retry-After"] = "3"
            return response
        return None

    server = Server(process_request=busy_once)
    term = wspipe_console(args, ["--reconnect", "--retry-delay", "0.2", server.url])
    term.wait_for("connected to")
    term.type("half typed")
    term.wait_for(lambda t: t.cursor_line() == "> half typed")
    # "connected to" is the client's side: the server may not have its handler yet.
    server.wait(lambda: server.connections, "a connection")
    server.run(server.connections[0].close(1012, "restart"))
    term.wait_for("closed by the server: 1012 restart")
    countdown = re.compile(r"^reconnecting in (\d+(?:\.\d)?) s \(attempt 3\); lines entered now are sent once connected$")
    term.wait_for(lambda t: countdown.match(t.lines()[t.screen.cursor.y - 1]) is not None)
    first = float(countdown.match(term.lines()[term.screen.cursor.y - 1]).group(1))
    check(term.cursor_line() == "> half typed", "the typed line under the status row: %r" % term.cursor_line())
    check(term.screen.cursor.x == len("> half typed"), "the cursor at its end (column %d)" % term.screen.cursor.x)
    term.type(HOME + "\x0b" + "queued\r")  # Ctrl-K keeps the typed line (Ctrl-Y brings it back)
    term.wait_for(lambda t: re.match(r"^reconnecting in [0-9.]+ s \(attempt 3\); 1 line queued, sent once connected$",
                                     t.lines()[t.screen.cursor.y - 1]) is not None)
    term.type("\x19")
    term.wait_for(lambda t: t.cursor_line() == "> half typed")
    if first > 1:
        term.wait_for(lambda t: (countdown.match(t.lines()[t.screen.cursor.y - 1]) or re.match(
            r"^reconnecting in ([0-9.]+) s", t.lines()[t.screen.cursor.y - 1])) and float(re.match(
                r"^reconnecting in ([0-9.]+) s", t.lines()[t.screen.cursor.y - 1]).group(1)) < first, timeout=3)
    # (That line is longer than a row: the rows joined.)
    term.wait_for(lambda t: re.search(r"connected to ws://\S+ again after [0-9.]+ s \(attempt 3; sending the 1 line entered "
                                      r"meanwhile\)>", "".join(t.lines())) is not None)
    server.wait(lambda: server.messages == ["queued"], "the line entered while disconnected, sent on the next connection")
    term.settle(0.3)
    check(not any(line.startswith("reconnecting") for line in term.lines()), "the status row stays: %r" % term.lines())
    check(term.cursor_line() == "> half typed", "the typed line after the reconnection: %r" % term.cursor_line())
    check("wspipe: disconnected after" not in term.text() and "wspipe: reconnected" not in term.text(),
          "the drop and the return told twice")
    term.type("\r")
    server.wait(lambda: server.messages == ["queued", "half typed"], "the typed line sent after the reconnection")
    end_with_ctrl_d(term)


def scenario_close_once(args):
    """The server's Close is told once: the console's closed line, not the status's line too."""
    server = Server()
    term = open_console(args, server)
    # "connected to" is the client's side: the server may not have its handler yet.
    server.wait(lambda: server.connections, "a connection")
    server.run(server.connections[0].close(4001, "bye now"))
    status, _ = term.wait_exit()
    check(status == 8, "exit status %r" % status)
    told = [line for line in term.lines() if "4001" in line]
    check(told == ["closed by the server: 4001 bye now"], "the close told %d times: %r" % (len(told), told))


def scenario_clear(args):
    """Ctrl-L clears the screen as readline does and draws the prompt and the line being
    edited, cursor in place, at its top; what was on the screen is left to the scrollback
    (no ESC [3J)."""
    server = Server(echo=True)
    term = open_console(args, server)
    term.type("one\r")
    term.wait_for("< one")
    term.type("typing here" + LEFT * 4)
    term.wait_for(lambda t: t.screen.cursor.x == len("> typing "))
    term.type("\x0c")
    term.wait_for(lambda t: t.lines()[0] == "> typing here")
    term.settle(0.2)
    check(term.text().strip() == "> typing here", "the screen after Ctrl-L:\n%s" % term.text())
    check((term.screen.cursor.y, term.screen.cursor.x) == (0, len("> typing ")), "the cursor where it was in the line")
    check(b"\x1b[3J" not in term.raw, "the scrollback erased")
    term.type("still \r")
    server.wait(lambda: server.messages == ["one", "typing still here"], "editing goes on after Ctrl-L")
    term.wait_for("< typing still here")
    end_with_ctrl_d(term)


def scenario_conversation(args):
    """--send/--expect and --until-json in the console, as in a pipe: the preamble's reply
    (shown) is matched, a line typed while it waits goes out only after it (queued under
    --reconnect), and the message --until-json names ends the run with status 0."""
    order = []

    async def answer(connection, message):
        order.append(message)
        if message == "auth":  # answered later, in a task: the next message is read meanwhile
            async def reply():
                await asyncio.sleep(0.8)
                order.append("<ok sent>")
                await connection.send("ok")
            asyncio.ensure_future(reply())
        else:
            await connection.send('{"done":true}' if message == "finish" else message)

    server = Server(on_message=answer)
    term = wspipe_console(args, ["--reconnect", "--send", "auth", "--expect", "^ok$", "--expect-timeout", "5",
                                 "--until-json", "done=true", server.url])
    term.wait_for("connected to ws://")
    term.type("early\r")
    term.wait_for("< ok")
    term.wait_for("< early")
    check(order == ["auth", "<ok sent>", "early"], "the typed line went out after the preamble: %r" % order)
    term.type("finish\r")
    status, _ = term.wait_exit()
    check(status == 0, "--until-json's match ends the run with 0: exit status %r" % status)


def scenario_opening(args):
    """While the first connection opens (a server that accepts and never answers), a row
    above the prompt says so, and what happens to a line entered then; it goes once the
    attempt fails."""
    listener = __import__("socket").socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    url = "ws://127.0.0.1:%d/" % listener.getsockname()[1]
    term = wspipe_console(args, ["--connect-timeout", "2", url])
    row = "connecting to %s... (a line entered now is not sent)" % url
    term.wait_for(lambda t: t.lines()[t.screen.cursor.y - 1] == row and t.cursor_line() == ">")
    term.type("early\r")
    term.wait_for("not connected: not sent")
    term.wait_for(lambda t: t.lines()[t.screen.cursor.y - 1] == row)
    status, _ = term.wait_exit()
    check(status == 3, "exit status %r" % status)
    check(row not in term.lines(), "the row stays after the end: %r" % term.lines())
    listener.close()


def scenario_dialing(args):
    """While --reconnect dials a server that is not there, the console keeps drawing."""
    listener = __import__("socket").socket()
    listener.bind(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    listener.close()  # nothing listens there now: each attempt is refused
    term = wspipe_console(args, ["--reconnect", "--retry-delay", "0.5", "ws://127.0.0.1:%d/" % port])
    term.wait_for("retrying (--reconnect)")
    term.type("typed while dialing")
    term.wait_for(lambda t: t.cursor_line() == "> typed while dialing")
    term.type("\x03")
    term.wait_for(lambda t: t.cursor_line() == ">")
    term.type("\x03")
    status, signal_status = term.wait_exit()
    check(signal_status == signal.SIGINT, "Ctrl-C while dialing: died of %r (status %r)" % (signal_status, status))


def scenario_history(args):
    """History across runs: 0600 in a 0700 directory, a leading space keeps a line out, Up and
    Ctrl-R recall, a symbolic link is refused with one warning and the console goes on."""
    server = Server()
    state = tempfile.mkdtemp()
    env = {"XDG_STATE_HOME": state}
    term = open_console(args, server, env=env)
    term.type("first\rsecond\r secret\r")
    server.wait(lambda: len(server.messages) == 3, "three lines")
    end_with_ctrl_d(term)
    path = os.path.join(state, "wspipe", "history")
    check(os.stat(path).st_mode & 0o777 == 0o600, "the history file's mode: %o" % os.stat(path).st_mode)
    check(os.stat(os.path.dirname(path)).st_mode & 0o777 == 0o700, "the directory's mode")
    with open(path) as handle:
        check(handle.read() == "first\nsecond\n", "what was saved (no line beginning with a space)")

    term = open_console(args, server, env=env)
    term.type("\x1b[A")
    term.wait_for(lambda t: t.cursor_line() == "> second")
    term.type("\x1b[A")
    term.wait_for(lambda t: t.cursor_line() == "> first")
    term.type("\r")
    server.wait(lambda: server.messages[3:] == ["first"], "Up recalls the last run's lines")
    term.type("\x12sec")
    term.wait_for(lambda t: "second" in t.cursor_line())
    term.type("\r")
    server.wait(lambda: server.messages[3:] == ["first", "second"], "Ctrl-R finds a line")
    end_with_ctrl_d(term)

    elsewhere = os.path.join(state, "elsewhere")
    with open(elsewhere, "w") as handle:
        handle.write("not history\n")
    os.remove(path)
    os.symlink(elsewhere, path)
    term = open_console(args, server, env=env)
    term.wait_for("the console keeps no history")
    term.type("third\r")
    server.wait(lambda: server.messages[5:] == ["third"], "the console works without its history")
    end_with_ctrl_d(term)
    with open(elsewhere) as handle:
        check(handle.read() == "not history\n", "the link's target was written")

    term = open_console(args, server, "--no-history", env={"XDG_STATE_HOME": tempfile.mkdtemp()})
    term.type("\x1b[A")
    term.settle(0.3)
    check(term.cursor_line() == ">", "--no-history: nothing to recall")
    end_with_ctrl_d(term)


def scenario_colours(args):
    """Colours at a terminal, none with NO_COLOR; --timestamps adds a time column."""
    server = Server(echo=True)
    term = open_console(args, server)
    term.type("hi\r")
    term.wait_for("< hi")
    end_with_ctrl_d(term)
    check(b"\x1b[36m< " in term.raw, "the marker in colour")
    term = open_console(args, server, "--timestamps", env={"NO_COLOR": "1"})
    term.type("hi\r")
    term.wait_for(lambda t: re.search(r"^\d\d:\d\d:\d\d < hi$", t.text(), re.M) is not None)
    check(re.search(r"^\d\d:\d\d:\d\d connected to ws://", term.text(), re.M) is not None, "the time column")
    end_with_ctrl_d(term)
    check(re.search(rb"\x1b\[(?!0m)[0-9;]*m", term.raw) is None, "NO_COLOR: no colour (the reset at the end aside)")


def scenario_resize(args):
    """SIGWINCH: the line being typed is drawn again for the new width."""
    server = Server()
    term = open_console(args, server)
    long = "".join(chr(ord("a") + i % 26) for i in range(100))
    term.type(long)
    term.wait_for(lambda t: t.screen.cursor.x == (102 % 80))
    term.screen.resize(ROWS, 120)
    term.child.setwinsize(ROWS, 120)
    term.wait_for(lambda t: t.screen.cursor.x == 102)
    check(term.cursor_line() == "> " + long, "one row of 120 columns: %r" % term.cursor_line())
    term.type("\r")
    server.wait(lambda: server.messages == [long], "the line sent")
    end_with_ctrl_d(term)


def scenario_narrow_xterm(args):
    """Narrowed, xterm (XTERM_VERSION set) and pyte cut rows rather than wrap them again: the
    redraw goes up the rows as drawn, so the lines above the prompt stay."""
    server = Server(echo=True)
    term = open_console(args, server, env={"XTERM_VERSION": "XTerm(390)"})
    term.type("above\r")
    term.wait_for("< above")
    long = "".join(chr(ord("a") + i % 26) for i in range(150))
    term.type(long)
    term.wait_for(lambda t: t.screen.cursor.x == (152 % 80))
    term.screen.resize(ROWS, 40)
    term.child.setwinsize(ROWS, 40)
    term.wait_for(lambda t: t.screen.cursor.x == 152 % 40)
    term.settle(0.2)
    row = term.screen.cursor.y
    check("".join(term.lines()[row - 3:row + 1]) == "> " + long, "the line over four rows of 40: %r" % term.lines())
    check(["> above", "< above"] == term.lines()[row - 5:row - 3], "the lines above the prompt: %r" % term.lines())
    term.type("\r")
    server.wait(lambda: server.messages == ["above", long], "the line sent")
    end_with_ctrl_d(term)


def scenario_reflow(args):
    """Narrowed, a terminal that wraps its rows again (tmux here; VTE, kitty alike; pyte does
    not) keeps no stale edit rows: the redraw goes up as many rows as the old ones became."""
    if not args.tmux:
        raise Failed("--tmux PATH is needed")
    server = Server()
    folder = tempfile.mkdtemp()
    socket_path = os.path.join(folder, "tmux")
    environment = dict(os.environ, TERM="xterm-256color", LANG="C.UTF-8", LC_ALL="C.UTF-8", XDG_STATE_HOME=folder)
    environment.pop("TMUX", None)

    def tmux(*words):
        return subprocess.run([args.tmux, "-S", socket_path, "-f", "/dev/null"] + list(words), env=environment,
                              capture_output=True, text=True, timeout=10).stdout

    def pane():
        # -J: rows the terminal wrapped (the connected line, old rows it reflowed) are joined
        # again; the edit rows are rows of their own (each ends in CR LF).
        return [line.rstrip() for line in tmux("capture-pane", "-p", "-J", "-t", "console").split("\n") if line.strip()]

    def edit_rows(lines, count):
        """The last `count` rows, joined, if nothing else on the screen is of the typed line."""
        if any("abcdefghij" in line for line in lines[:-count]):
            return None
        return "".join(lines[-count:])

    def wait(predicate, what, timeout=10):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if predicate(pane()):
                return
            time.sleep(0.05)
        raise Failed("%s:\n%s" % (what, "\n".join(pane())))

    tmux("new-session", "-d", "-s", "console", "-x", "60", "-y", "20", "%s %s" % (args.wspipe, server.url))
    try:
        wait(lambda lines: any(line.startswith("connected to") for line in lines), "no connected line")
        long = "".join(chr(ord("a") + i % 26) for i in range(150))
        tmux("send-keys", "-t", "console", "-l", long)
        wait(lambda lines: edit_rows(lines, 3) == "> " + long, "the line typed at 60 columns")
        tmux("resize-window", "-t", "console", "-x", "40")
        wait(lambda lines: len(lines[-1]) == 152 % 40, "the line drawn again at 40 columns")
        time.sleep(0.3)
        # tmux keeps the cursor's row and moves what reflowed above the screen into its
        # scrollback (which no cursor reaches): on the screen, only the new rows.
        lines = pane()
        check(edit_rows(lines, 4) == "> " + long, "stale rows after narrowing:\n%s" % "\n".join(lines))
        cursor = tmux("display-message", "-p", "-t", "console", "#{cursor_x},#{cursor_y}").strip()
        tmux("send-keys", "-t", "console", "Enter")
        server.wait(lambda: server.messages == [long], "the line sent (cursor was at %s)" % cursor)
        tmux("send-keys", "-t", "console", "C-d")
        server.wait(lambda: server.closes == [(1000, "")], "Ctrl-D's Close")
    finally:
        tmux("kill-server")


# MARK: - Endings, in a shell

class Shell(Terminal):
    """bash in the pty, where wspipe is run as a person would."""

    def __init__(self, env=None):
        super().__init__("/bin/bash", ["--norc", "--noprofile"], env=dict(env or {}, PS1="$ "))
        self.wait_for("$")
        self.counter = 0

    def stty(self):
        """`stty -g` of the shell's terminal (read from the raw output: it may wrap)."""
        self.counter += 1
        self.type("echo S$(stty -g)E%d\r" % self.counter)
        pattern = r"S([0-9a-f:]+)E%d\r?\n" % self.counter
        self.wait_for(lambda t: re.search(pattern, t.raw.decode("utf-8", "replace")) is not None)
        return re.search(pattern, self.raw.decode("utf-8", "replace")).group(1)


def wspipe_pid(shell):
    """The shell's one child: wspipe."""
    return int(open("/proc/%d/task/%d/children" % (shell.child.pid, shell.child.pid)).read().split()[0])


def ending(args, how):
    server = Server(echo=True)
    shell = Shell()
    before = shell.stty()
    options = "--timeout 1 " if how == "timeout" else ""
    # After Ctrl-Z bash would go on with the rest of the line: $? is asked for afterwards.
    then = "" if how in ("suspend", "sigtstp") else "; echo RC=$?"
    shell.type("%s %s%s%s\r" % (args.wspipe, options, server.url, then))
    shell.wait_for("connected to")
    shell.type("half typed")
    shell.settle(0.2)
    if how == "ctrl-c":
        shell.type("\x03")  # clears the line
        shell.settle(0.2)
        check(shell.cursor_line() == ">", "Ctrl-C clears a non-empty line: %r" % shell.cursor_line())
        shell.type("\x03")
        expected = 130
    elif how == "ctrl-d":
        shell.type("\x7f" * len("half typed") + "\x04")
        expected = 0
    elif how == "sigterm":
        server.wait(lambda: server.connections, "a connection")
        os.kill(wspipe_pid(shell), signal.SIGTERM)
        expected = 143
    elif how == "timeout":
        expected = 124
    elif how in ("suspend", "sigtstp"):
        if how == "suspend":
            shell.type("\x1a")
        else:
            server.wait(lambda: server.connections, "a connection")
            os.kill(wspipe_pid(shell), signal.SIGTSTP)
        shell.wait_for("Stopped")
        check(shell.stty() == before, "Ctrl-Z: the shell's terminal modes while wspipe is stopped")
        shell.type("fg\r")
        shell.wait_for(lambda t: t.cursor_line() == "> half typed")
        shell.type(" after fg\r")
        server.wait(lambda: server.messages == ["half typed after fg"], "typing goes on after fg")
        shell.type("\x04")
        expected = 0
    elif how == "server-close":
        server.wait(lambda: server.connections, "a connection")
        server.run(server.connections[0].close(4001, "bye now"))
        expected = 8  # a close code other than 1000: the exit status as in a pipeline
    if how in ("suspend", "sigtstp"):
        shell.wait_for(lambda t: t.cursor_line() == "$")
        shell.type("echo RC=$?\r")
    if how == "ctrl-c":
        # wspipe died of SIGINT: bash abandons the rest of the line, as after any Ctrl-C.
        shell.wait_for(lambda t: t.cursor_line() == "$")
        check(re.search(r"^RC=", shell.text(), re.M) is None, "bash went on after wspipe's Ctrl-C")
        shell.type("echo RC=$?\r")
    shell.wait_for(lambda t: re.search(r"^RC=\d+", t.text(), re.M) is not None)
    status = int(re.search(r"^RC=(\d+)", shell.text(), re.M).group(1))
    check(status == expected, "%s: exit status %d, expected %d" % (how, status, expected))
    after = shell.stty()
    check(before == after, "%s: stty -g changed:\n%s\n%s" % (how, before, after))
    shell.settle(0.3)
    check("command not found" not in shell.text(), "typed input reached the shell")
    # wspipe's output, from its first line to the shell's next: bash toggles bracketed
    # paste around each line it reads, so only this stretch is wspipe's.
    raw = bytes(shell.raw)
    start = raw.rfind(args.wspipe.encode(), 0, raw.rindex(b"connected to"))
    ours = raw[start:raw.find(b"$ echo", start) + 1]
    restore = b"\x1b[?2004l\x1b[?25h\x1b[0m"
    check(restore in ours, "bracketed paste off, cursor shown, colours reset: %r" % ours[-200:])
    after = ours[ours.rfind(restore):]
    check(after.count(b"\x1b[?2004h") == after.count(b"\x1b[?2004h$"), "bracketed paste on again after the end")
    if how == "server-close":
        check("closed by the server: 4001 bye now" in shell.text(), "who closed, code and reason")
    if how == "ctrl-d":
        server.wait(lambda: server.closes == [(1000, "")], "Ctrl-D closes with 1000")
    if how == "ctrl-c":
        server.wait(lambda: server.closes == [(1001, "")], "Ctrl-C closes with 1001")
    shell.type("exit\r")


def scenario_ctrl_c(args):
    ending(args, "ctrl-c")


def scenario_ctrl_d(args):
    ending(args, "ctrl-d")


def scenario_sigterm(args):
    ending(args, "sigterm")


def scenario_no_interactive(args):
    """--no-interactive at a terminal: the byte pipe (the terminal's own echo, replies as
    bytes, no prompt)."""
    server = Server(echo=True)
    term = wspipe_console(args, ["--no-interactive", server.url])
    server.wait(lambda: server.connections, "a connection")
    term.type("hello\r")
    server.wait(lambda: server.messages == ["hello"], "the line")
    term.wait_for(lambda t: t.text().count("hello") == 2)
    term.type("\x04")
    status, _ = term.wait_exit()
    check(status == 0, "exit status %r" % status)
    check("connected to" not in term.text() and ">" not in term.text(), "no console: %r" % term.text())


def scenario_background(args):
    """A job in the background is no console: it connects (as a console it would have met
    SIGTTOU setting the terminal's modes, and stopped first) and leaves the terminal alone."""
    server = Server(echo=True)
    shell = Shell()
    before = shell.stty()
    shell.type("%s %s &\r" % (args.wspipe, server.url))
    server.wait(lambda: server.connections, "a connection")
    shell.settle(0.5)
    check(shell.stty() == before, "the terminal's modes changed")
    check("connected to" not in shell.text(), "a console in the background")
    shell.type("kill %1; wait\r")
    shell.type("exit\r")


def scenario_timeout(args):
    ending(args, "timeout")


def scenario_suspend(args):
    ending(args, "suspend")


def scenario_sigtstp(args):
    ending(args, "sigtstp")


def scenario_server_close(args):
    ending(args, "server-close")


def scenario_loop(args):
    server = Server(echo=True)
    shell = Shell()
    before = shell.stty()
    shell.type("for i in 1 2 3; do %s %s; echo rc=$?; done; echo LOOPDONE\r" % (args.wspipe, server.url))
    shell.wait_for("connected to")
    shell.settle(0.3)
    shell.type("\x03")
    shell.wait_for(lambda t: t.cursor_line().startswith("$"), timeout=10)
    shell.settle(0.5)
    text = shell.text()
    check(re.search(r"^(rc=|LOOPDONE)", text, re.M) is None, "the loop went on after one Ctrl-C:\n" + text)
    check(text.count("connected to") == 1, "a second console started")
    check(shell.stty() == before, "stty -g changed")
    shell.type("exit\r")


# MARK: - The stdio server's console

def scenario_server(args):
    term = wspipe_console(args, ["-l", "0"])
    term.wait_for("listening on ws://127.0.0.1:")
    port = int(re.search(r"listening on ws://127\.0\.0\.1:(\d+)/", term.text()).group(1))
    received = []

    async def client():
        async with connect("ws://127.0.0.1:%d/" % port, compression=None) as connection:
            await connection.send("from the client")
            received.append(await connection.recv())
            try:
                await connection.recv()
            except ConnectionClosed:
                rcvd = connection.protocol.close_rcvd
                received.append(("close", rcvd.code if rcvd else None))

    thread = threading.Thread(target=lambda: asyncio.run(client()), daemon=True)
    thread.start()
    term.wait_for("connected")
    term.wait_for("< from the client")
    term.type("/ping\r")
    term.wait_for("round trip")
    term.type("to the client\r")
    deadline = time.time() + 10
    while not received and time.time() < deadline:
        time.sleep(0.05)
    check(received[:1] == ["to the client"], "the client received %r" % received)
    term.type("/close 4002 done\r")
    thread.join(10)
    check(received[1:] == [("close", 4002)], "the client's Close: %r" % received)
    end_with_ctrl_d(term)


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--wspipe", required=True)
    parser.add_argument("--tmux", help="tmux, for the scenario of a terminal that reflows")
    parser.add_argument("scenario")
    args = parser.parse_args()
    scenario = globals().get("scenario_" + args.scenario.replace("-", "_"))
    if scenario is None:
        print("no scenario %r" % args.scenario)
        sys.exit(2)
    try:
        scenario(args)
    except (Failed, pexpect.ExceptionPexpect) as failure:
        import traceback
        traceback.print_exc()
        print("FAILED: %s" % failure)
        terminal = Terminal.last
        if terminal is not None:
            print("--- screen ---")
            print(terminal.text())
        sys.exit(1)
    print("OK")


Terminal.last = None
_init = Terminal.__init__


def _remember(self, *a, **k):
    _init(self, *a, **k)
    Terminal.last = self


Terminal.__init__ = _remember

if __name__ == "__main__":
    main()
