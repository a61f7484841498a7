import CWSPipeShims
import Glibc
import WebSocketCore
import WebSocketEngine
import WebSocketTransport

/// wspipe as a console (issue 36; when it is one: `ConsoleRule`): the text-mode client or
/// the stdio server with a person at a terminal. The terminal is in raw mode while the run
/// lasts (`wsp_terminal_raw`; restored on every exit path, a signal's included, by
/// `wsp_terminal_restore`); typed keys are edited here and each line entered is one text
/// message, or a slash command (`ConsoleCommand`); received messages, wspipe's own lines and
/// stderr's are printed above the line being typed (`ConsoleScreen`), everything from the
/// server through `Diagnostics.terminalSafe`. The session stays the same: stdin's reads come
/// here instead of the framer, and each message comes here through stdout's diversion
/// (`StdoutWriter.console`) while the assembler only counts it (-n, --idle-timeout).
final class Console {
    let screen: ConsoleScreen
    unowned let session: Session
    private var keys = ConsoleKeyDecoder()
    private var editor = LineEditor(completions: ConsoleCommand.names)
    /// The saved history (nil: --no-history, or the file refused).
    private var history: ConsoleHistory?
    /// A lone ESC waits this long for the rest of a sequence before it is the Esc key.
    private var escapeTimer: EventLoop.Timer?
    private var columns = 80
    private var screenRows = 24
    /// The first row shown of a line taller than the screen (`LineRendering.window`).
    private var windowStart = 0
    private let prompt = "> "
    /// The message being received.
    private var message: [UInt8] = []
    private var messageKind: MessageKind = .text
    private var prettyJSON = false
    private var quiet = false
    /// /ping's pings waiting for their pong: payload and when sent.
    private var pings: [(payload: [UInt8], sent: Instant)] = []
    private var pingCount = 0
    private var started = false
    /// --reconnect between connections: the status row above the prompt.
    private var reconnectStatus = ReconnectStatus()
    /// Counts its seconds down.
    private var statusTimer: EventLoop.Timer?
    /// How the next "connected to" line ends (again after N s, the attempt).
    private var connectedWords = ""
    private var hinted = false
    /// The first connection is opening (a slow server, a dial that times out): its row.
    private var openingRow: String?

    init(session: Session, settings: ConsoleSettings) {
        self.session = session
        screen = ConsoleScreen(colours: settings.colours, timestamps: session.config.stdio.timestamps,
                               reflows: settings.reflowsOnResize)
        if let environment = settings.historyEnvironment { history = ConsoleHistory(environment: environment) }
    }

    // MARK: - The terminal

    /// Raw mode and the prompt (the loop is about to run).
    func start() {
        guard !started else { return }
        started = true
        _ = wsp_terminal_raw(0)
        Signals.watchResize()
        wsp_terminal_watch_stops(session.loop.wakeFD)
        if var history {
            let (entries, warnings) = history.load()
            self.history = history
            editor.replaceHistory(entries)
            warn(warnings)
        }
        readColumns()
        redraw()
        session.refreshStdin()  // keys are read from the start (the stdio server reads stdin only with a client)
    }

    /// The run is over: the edit rows go, the terminal is as it was (nothing typed left).
    func finish() {
        guard started else { return }
        started = false
        screen.clear()
        wsp_terminal_restore()
        session.log.screen = nil  // the run's last lines (its status, --stats) go to stderr again
    }

    /// The loop was woken: the window may have changed size, or the process been continued
    /// after a stop (Ctrl-Z, `kill -TSTP`, SIGSTOP: the shell has had the terminal since).
    func woken() {
        if wsp_terminal_take_continued() != 0 {
            screen.forget()
            _ = wsp_terminal_raw(0)
            _ = Signals.resized.exchange(true, ordering: .relaxed)
        }
        guard Signals.resized.exchange(false, ordering: .relaxed) else { return }
        readColumns()
        redraw()
    }

    private func readColumns() {
        let read = Int(wsp_terminal_columns(1))
        columns = read > 0 ? read : 80
        let rows = Int(wsp_terminal_rows(1))
        screenRows = rows > 0 ? rows : 24
    }

    private func redraw(clearingScreen: Bool = false) {
        let status = (reconnectStatus.line(at: Instant.now()) ?? openingRow).map { LineRendering(prompt: "", line: Array($0), cursor: 0, columns: columns).rows } ?? []
        // The edit rows stay within the screen, a row of it left for what was printed last.
        let (rendering, start) = editor.render(prompt: prompt, columns: columns)
            .window(rows: screenRows - 1 - status.count, from: windowStart)
        windowStart = start
        screen.draw(status: status, rows: rendering.rows, row: rendering.cursorRow, column: rendering.cursorColumn,
                    columns: columns, clearingScreen: clearingScreen)
    }

    /// Ctrl-Z: as SIGTSTP from elsewhere (its handler restores the terminal and stops the
    /// process; SIGCONT's wakes the loop, `woken` brings raw mode back and redraws).
    private func suspend() {
        screen.clear()
        raise(SIGTSTP)
    }

    // MARK: - Typed input

    /// One read of the terminal.
    func input(_ bytes: UnsafeRawBufferPointer) {
        apply(ConsoleKey.joiningText(keys.feed(bytes)))
        if keys.hasPendingEscape { awaitRestOfEscape() }
    }

    private func apply(_ typed: [ConsoleKey]) {
        var redraws = false
        var clears = false
        for key in typed {
            switch editor.apply(key) {
            case .none: break
            case .redraw: redraws = true
            case .submit(let lines):
                for text in lines { submit(text) }
                redraws = true
            case .interrupt:
                // Exactly SIGINT's path: Close 1001, then the process dies of SIGINT.
                raise(SIGINT)
            case .endOfInput: endOfInput()
            case .suspend:
                suspend()
                redraws = false
                clears = false
            case .clearScreen: clears = true
            case .bell: writeAll(1, [0x07])
            }
        }
        if redraws || clears { redraw(clearingScreen: clears) }
    }

    /// ESC and nothing after it yet: the Esc key, unless the rest of a sequence follows soon.
    private func awaitRestOfEscape() {
        let timer = escapeTimer ?? session.loop.timer { [unowned self] in
            guard keys.hasPendingEscape else { return }
            apply(keys.flushPendingEscape())
        }
        escapeTimer = timer
        session.loop.arm(timer, at: Instant.now().adding(seconds: 0.05))
    }

    /// A line entered: it is echoed above the prompt, saved, then sent or carried out (a
    /// command is saved as typed: /send @FILE saves the command, never the file).
    private func submit(_ text: String) {
        screen.printAbove([prompt + Diagnostics.terminalSafe(text)], style: .received)
        if var saved = history {
            warn(saved.append(text))
            history = saved
        }
        do throws(ConsoleCommandError) {
            try run(ConsoleCommand.parse(text))
        } catch {
            say(error.message, style: .error)
        }
    }

    private func run(_ command: ConsoleCommand) throws(ConsoleCommandError) {
        switch command {
        case .text(let text): try send(.text, Array(text.utf8))
        case .binaryHex(let bytes): try send(.binary, bytes)
        case .binaryFile(let path): try send(.binary, file(path, "/binary"))
        case .sendFile(let path):
            let bytes = try file(path, "/send")
            guard UTF8Validator.isValid(bytes) else { throw ConsoleCommandError("/send: '\(path)' is not UTF-8 text (/binary @FILE sends it as binary)") }
            try send(.text, bytes)
        case .ping(let text):
            let payload = Array((text.isEmpty ? "wspipe-\(pingCount + 1)" : text).utf8)
            guard let driver = session.driver, driver.ping(payload) else { throw ConsoleCommandError("/ping: not connected") }
            pingCount += 1
            pings.append((payload, Instant.now()))
        case .close(let payload):
            guard session.driver != nil else { throw ConsoleCommandError("/close: not connected") }
            session.consoleClose(payload)
        case .json(let on):
            prettyJSON = on
            say("JSON messages \(on ? "pretty-printed" : "printed as received")")
        case .quiet:
            quiet.toggle()
            say(quiet ? "received messages are not shown (/quiet again shows them)" : "received messages are shown")
        case .help:
            let width = ConsoleCommand.summaries.map(\.0.count).max() ?? 0
            for (name, what) in ConsoleCommand.summaries {
                say(name + String(repeating: " ", count: width - name.count + 2) + what)
            }
        case .quit: endOfInput()
        }
    }

    private func send(_ opcode: Opcode, _ bytes: [UInt8]) throws(ConsoleCommandError) {
        switch session.consoleSend(opcode, bytes) {
        case .sent: break
        // Between connections: the status row counts it (not while a preamble waits).
        case .queued: if session.driver == nil { reconnectStatus.lineQueued() }
        case .nowhere:
            throw ConsoleCommandError(session.driver != nil && !session.conversation.preambleDone
                ? "the preamble (--expect) is still waiting: not sent" : "not connected: not sent")
        }
    }

    /// Ctrl-D on an empty line, /quit. While --reconnect is between connections the run
    /// ends now, and the lines entered meanwhile are not sent: said, not lost silently.
    private func endOfInput() {
        if session.driver == nil, reconnectStatus.queued > 0 {
            let count = reconnectStatus.queued
            say("\(count) line\(count == 1 ? "" : "s") entered while disconnected not sent (the run ends before a connection)",
                style: .error)
        }
        session.consoleEndOfInput()
    }

    private func file(_ path: String, _ command: String) throws(ConsoleCommandError) -> [UInt8] {
        guard let bytes = SmallFile.contents(of: path) else {
            throw ConsoleCommandError("\(command): cannot read '\(Diagnostics.terminalSafe(path))': \(SmallFile.whyUnreadable(path))")
        }
        return bytes
    }

    /// The history's warnings, as stderr's (once: the history is then off).
    private func warn(_ warnings: [String]) {
        for warning in warnings { session.log.warning(warning) }
    }

    /// One of wspipe's own lines.
    func say(_ text: String, style: ConsoleScreen.Style = .status) {
        screen.printAbove([text], style: style)
    }

    // MARK: - Received

    func messageStarted(_ kind: MessageKind) {
        messageKind = kind
        message.removeAll(keepingCapacity: message.count <= 1 << 16)
    }

    func messageData(_ bytes: UnsafeMutableRawPointer, count: Int) {
        message.append(contentsOf: UnsafeRawBufferPointer(start: bytes, count: count))
    }

    func messageEnded() {
        guard !quiet else { return }
        screen.printAbove(ConsoleRendering.message(message, kind: messageKind, prettyJSON: prettyJSON), style: .received)
    }

    /// A pong: the round trip of the /ping it answers.
    func pong(_ payload: [UInt8]) {
        guard let index = pings.firstIndex(where: { $0.payload == payload }) else { return }
        let seconds = Instant.now().seconds(since: pings[index].sent)
        pings.removeSubrange(...index)
        say("pong \(Diagnostics.terminalSafe(String(decoding: payload, as: UTF8.self))): round trip \(formatMilliseconds(seconds)) ms")
    }

    // MARK: - The connection

    /// The run's first connection opens (before `start`): a status row says so until it
    /// is connected or fails, rather than a bare prompt that seems ready.
    func opening(_ url: String) {
        openingRow = "connecting to \(TerminalText.safe(url))... (a line entered now is not sent)"
    }

    /// `who`: "connected to URL" (the client), "client ADDRESS connected" (the server).
    func connected(_ who: String, subprotocol: String?, compressed: Bool) {
        var text = Diagnostics.terminalSafe(who)
        if let subprotocol { text += ", subprotocol \(Diagnostics.terminalSafe(subprotocol))" }
        if compressed { text += ", permessage-deflate" }
        // The hint once a run: a reconnection's line says how long the gap was instead.
        openingRow = nil
        say(text + connectedWords + (hinted ? "" : " (/help for commands, Ctrl-D to close)"))
        connectedWords = ""
        hinted = true
    }

    func ended(_ ending: ConnectionEnding, peer: String) {
        pings.removeAll()
        openingRow = nil
        reconnectStatus.disconnected(at: Instant.now())
        say(ConsoleRendering.ending(ending, peer: peer))
    }

    /// --reconnect's turning points (`ReconnectingRunner`): the status row while there is
    /// no connection, and how the next "connected to" line ends.
    func reconnection(_ event: ConnectionEvent) {
        let now = Instant.now()
        switch event {
        case .retry(let seconds, let attempt, _): reconnectStatus.retry(after: seconds, attempt: attempt, now: now)
        case .connecting(_, let attempt): reconnectStatus.dialing(attempt: attempt)
        case .connected(_, _, let attempt): connectedWords = reconnectStatus.connected(attempt: attempt, now: now)
        case .givingUp: reconnectStatus = ReconnectStatus()
        case .disconnected, .resubscribed, .expectFailed, .dropped: return
        }
        countDown(from: now)
        redraw()
    }

    /// The status row's countdown: drawn again when its number changes.
    private func countDown(from now: Instant) {
        let timer = statusTimer ?? session.loop.timer { [unowned self] in
            redraw()
            countDown(from: Instant.now())
        }
        statusTimer = timer
        session.loop.arm(timer, at: reconnectStatus.nextChange(after: now))
    }
}

/// How the console shows what came from the peer (pure; every text through
/// `Diagnostics.terminalSafe`).
enum ConsoleRendering {
    /// A received message's lines: `< TEXT`, or `< binary N bytes: ` and the first 32 bytes
    /// in hex; with /json on, a JSON text pretty-printed over several lines.
    static func message(_ bytes: [UInt8], kind: MessageKind, prettyJSON: Bool) -> [String] {
        guard kind == .text else {
            let hex = bytes.prefix(32).map { ($0 < 0x10 ? "0" : "") + String($0, radix: 16) }.joined(separator: " ")
            return ["< binary \(bytes.count) byte\(bytes.count == 1 ? "" : "s"): \(hex)\(bytes.count > 32 ? " ..." : "")"]
        }
        if prettyJSON, let value = try? bytes.withUnsafeBytes({ raw throws(JSONError) in try JSONParser.parse(raw) }) {
            let lines = pretty(value, indent: "").split(separator: "\n", omittingEmptySubsequences: false)
            return lines.enumerated().map { ($0.offset == 0 ? "< " : "  ") + Diagnostics.terminalSafe(String($0.element)) }
        }
        return ["< " + Diagnostics.terminalSafe(String(decoding: bytes, as: UTF8.self))]
    }

    /// A JSON value, two spaces a level.
    static func pretty(_ value: JSONValue, indent: String) -> String {
        let inner = indent + "  "
        switch value {
        case .null: return "null"
        case .bool(let flag): return flag ? "true" : "false"
        case .number(let number): return number.text  // as the server wrote it
        case .string(let text): return quoted(text)
        case .array(let items):
            guard !items.isEmpty else { return "[]" }
            return "[\n" + items.map { inner + pretty($0, indent: inner) }.joined(separator: ",\n") + "\n" + indent + "]"
        case .object(let members):
            guard !members.isEmpty else { return "{}" }
            return "{\n" + members.map { inner + quoted($0.0) + ": " + pretty($0.1, indent: inner) }.joined(separator: ",\n")
                + "\n" + indent + "}"
        }
    }

    private static func quoted(_ text: String) -> String {
        var out: [UInt8] = []
        Array(text.utf8).withUnsafeBytes { JSONWriter.appendString($0, to: &out) }
        return String(decoding: out, as: UTF8.self)
    }

    /// The line when a connection ends: code, reason and who closed.
    static func ending(_ ending: ConnectionEnding, peer: String) -> String {
        func describe(_ payload: ClosePayload?) -> String {
            guard let payload, let code = payload.code else { return "no code" }
            let reason = String(decoding: payload.reason, as: UTF8.self)
            return "\(code.rawValue)" + (reason.isEmpty ? "" : " " + Diagnostics.terminalSafe(reason))
        }
        switch ending {
        case .closed(let handshake) where handshake.initiatedByUs:
            return "closed by us: \(describe(handshake.sent)) (the \(peer) answered \(describe(handshake.received)))"
        case .closed(let handshake):
            return "closed by the \(peer): \(describe(handshake.received))"
        case .failed(let error):
            return "connection failed: \(Diagnostics.terminalSafe(error.description))"
        case .lost:
            return "connection lost (no closing handshake)"
        case .timedOut(let wait):
            return "the \(peer) did not finish the closing handshake within \(formatSeconds(wait.limit)) s"
        }
    }
}
