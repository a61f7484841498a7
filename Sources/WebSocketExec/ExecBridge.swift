import Glibc
import WebSocketCore
import WebSocketEngine
import WebSocketTransport

/// Settings of the messages ⇄ child bridge.
public struct ExecOptions: Sendable {
    /// stdout as binary messages of what each read gave (up to `chunkSize`), instead of one
    /// text message per line.
    public var binary = false
    /// Longest stdout line sent, in bytes (`--max-message-size`): a longer one ends the
    /// connection with 1011.
    public var maximumMessageSize = 64 << 20
    /// Bytes read from stdout at a time (and the binary chunk size).
    public var chunkSize = 64 * 1024
    /// Client bytes waiting for the child's stdin beyond which the socket is not read.
    public var stdinQueueLimit = 256 * 1024

    public init() {}
}

/// How one exec connection ended: the connection's ending and the child's.
public struct ExecOutcome: Equatable, Sendable {
    public let connection: ConnectionEnding
    public let child: ChildTermination
    /// The Close we sent: what the child's ending says (also as the answer to the
    /// client's Close), 1011 when its output broke a limit or it outlived the grace after
    /// the client's Close. Nil when the connection ended otherwise (the client was lost).
    public let closeSent: ClosePayload?
}

/// The delegate of a server-role `ConnectionDriver` that runs one `ChildProcess`:
/// client messages go to the child's stdin (a text message as its bytes and `\n`, binary as
/// is), the child's stdout comes back as one text message per line (without the `\n`; a
/// line that is not UTF-8 goes as a binary message with the same bytes, so nothing is lost
/// and the client never gets invalid text), or, with `binary`, as binary messages.
///
/// Backpressure both ways, never an unbounded buffer: at most `stdinQueueLimit` (plus one
/// socket read) waits for a child that does not read, then the socket is not read
/// (`pauseReading()`); stdout is read only while the connection's queue is below its
/// `queueLimit`.
///
/// Endings: the child exits and its stdout ends → Close 1000 after everything it wrote
/// (status 0) or 1011 with "exit status N" / "killed by signal N". The client's Close →
/// what it sent before is written, the child's stdin is closed, and what the child still
/// writes is sent until it exits (then the Close its status gives answers the client's)
/// or the grace passes (1011 "program did not exit"; the group gets its signals then,
/// `ChildProcess.endGroup`). The client lost → the same for the child, whose later
/// output is read and dropped.
public final class ExecBridge: ConnectionDelegate {
    public let child: ChildProcess
    public let options: ExecOptions
    private var driver: ConnectionDriver?
    /// When both the connection and the child are over.
    public var onEnd: (ExecOutcome) -> Void = { _ in }

    // Client → child.
    private var toChild = SegmentList()
    private var messageKind: MessageKind = .text
    private var stdinGone = false
    /// The client's Close came: nothing more comes from it; the child's output still goes.
    private var clientClosed = false
    /// Nothing more goes to the client either (it is lost, or we closed): output is dropped.
    private var clientGone = false
    /// Ends the wait for the child after the client's Close.
    private var graceTimer: EventLoop.Timer?
    // Child → client.
    private var buffer: ByteBuffer
    /// Start of the line not yet sent, in `buffer`.
    private var lineStart = 0
    private var stdoutEnded = false
    private var sentClose: ClosePayload?
    private var ending: ConnectionEnding?
    private var keepAlive: ExecBridge?

    public init(child: ChildProcess, options: ExecOptions = .init()) {
        self.child = child
        self.options = options
        buffer = ByteBuffer(capacity: options.chunkSize)
    }

    /// Starts `driver` (made with this bridge as its delegate) and the child's pipes.
    public func start(_ driver: ConnectionDriver) {
        driver.answersCloseItself = true
        attach(driver)
        driver.start()
    }

    /// Starts the child's pipes for `driver`, which its owner starts (a server hands the
    /// driver over after the 101; events before `attach` are handled too). Set the driver's
    /// `answersCloseItself` before it starts, so the child's last output reaches a client
    /// that closed.
    public func attach(_ driver: ConnectionDriver) { begin(driver) }

    /// `driver` nil: the connection ended before the bridge was attached.
    func begin(_ driver: ConnectionDriver?) {
        guard keepAlive == nil else { return }
        self.driver = ending == nil ? driver : nil
        keepAlive = self
        child.stdin?.onReady = { [weak self] in self?.writeStdin() }
        child.stdout?.onReady = { [weak self] in self?.readStdout() }
        child.onExit = { [weak self] _ in
            // Its stdin is closed: what waits for it is dropped (and the socket unpaused).
            self?.dropStdin()
            self?.closeIfChildDone()
        }
        child.onFinish = { [weak self] _ in self?.finishIfDone() }
        readStdout()
        finishIfDone()
    }

    /// Client bytes waiting for the child's stdin.
    public var queuedForChild: Int { toChild.byteCount }

    // MARK: - Client → child

    public func connection(_ connection: ConnectionDriver, didStartMessage kind: MessageKind) { messageKind = kind }

    public func connection(_ connection: ConnectionDriver, didReceive bytes: UnsafeMutableRawPointer, count: Int, in buffer: ByteBuffer) {
        guard !stdinGone else { return }
        toChild.append(buffer, bytes, count)
    }

    public func connectionDidEndMessage(_ connection: ConnectionDriver) {
        guard !stdinGone else { return }
        if messageKind == .text { toChild.append(ByteBuffer.newline, ByteBuffer.newline.base, 1) }
    }

    public func connectionDidProcessInput(_ connection: ConnectionDriver) { writeStdin() }

    private func writeStdin() {
        guard let pipe = child.stdin, !stdinGone else { return dropStdin() }
        let vectors = connectionVectors
        while !toChild.isEmpty {
            let count = toChild.fill(vectors)
            switch pipe.write(UnsafePointer(vectors.baseAddress!), count: count) {
            case .done(let n):
                toChild.consume(n)
            case .wouldBlock:
                pipe.wait(.writable)
                updatePause()
                return
            case .endOfStream, .failed:
                // The child closed its stdin (or exited): what the client sends is dropped.
                return dropStdin()
            }
        }
        pipe.wait([])
        updatePause()
        if clientClosed { child.closeStdin() }
    }

    private func dropStdin() {
        stdinGone = true
        toChild.removeAll()
        updatePause()
    }

    private func updatePause() {
        if toChild.byteCount >= options.stdinQueueLimit { driver?.pauseReading() } else { driver?.resumeReading() }
    }

    private var connectionVectors: UnsafeMutableBufferPointer<iovec> {
        let all = child.loop.vectors
        return UnsafeMutableBufferPointer(rebasing: all[0..<min(all.count, 64)])
    }

    // MARK: - Child → client

    public func connectionHasRoom(_ connection: ConnectionDriver) { readStdout() }

    private var clientHasRoom: Bool {
        guard let driver, !clientGone else { return true }  // after the client: read and drop
        return driver.queuedBytes < driver.options.queueLimit
    }

    private func readStdout() {
        guard let pipe = child.stdout else { return }
        var reads = 0
        while clientHasRoom {
            if reads == 16 {
                // Let the other descriptors have a turn; come back before the next wait.
                child.loop.later { [weak self] in self?.readStdout() }
                pipe.wait([])
                return
            }
            reads += 1
            makeRoom()
            let before = buffer.count
            switch pipe.read(into: buffer.end, count: buffer.free) {
            case .done(let n):
                buffer.count += n
                if clientGone { buffer.count = 0; lineStart = 0; continue }
                if options.binary {
                    send(.binary, from: before, count: n)
                    lineStart = buffer.count
                } else if !sendLines(scanningFrom: before) {
                    return
                }
            case .wouldBlock:
                pipe.wait(.readable)
                return
            case .endOfStream, .failed:
                if !clientGone && !options.binary && lineStart < buffer.count {
                    sendLine(from: lineStart, to: buffer.count)  // the last line, without its \n
                }
                lineStart = buffer.count
                stdoutEnded = true
                child.stdoutClosed()
                closeIfChildDone()
                return
            }
        }
        pipe.wait([])  // the client is behind: wait for `connectionHasRoom`
    }

    /// A buffer with room after the unsent line: a fresh one when the connection still
    /// holds pieces of this one, a bigger one for a line longer than the buffer.
    private func makeRoom() {
        let carried = buffer.count - lineStart
        if carried == 0 && isKnownUniquelyReferenced(&buffer) {
            buffer.count = 0
            lineStart = 0
            if buffer.free >= options.chunkSize / 4 { return }
        }
        if buffer.free >= options.chunkSize / 4 && lineStart == 0 { return }
        let capacity = carried * 2 > options.chunkSize ? carried * 2 : options.chunkSize
        let fresh = ByteBuffer(capacity: capacity)
        fresh.base.copyMemory(from: buffer.base + lineStart, byteCount: carried)
        fresh.count = carried
        buffer = fresh
        lineStart = 0
    }

    /// Sends every complete line; false when a line grew over the limit (the connection is
    /// closing).
    private func sendLines(scanningFrom start: Int) -> Bool {
        var index = start
        while index < buffer.count {
            guard let found = memchr(buffer.base + index, 0x0A, buffer.count - index) else { break }
            let newline = buffer.base.distance(to: found)
            // A line over the limit ends the connection, which resets the buffer: stop here.
            guard sendLine(from: lineStart, to: newline) else { return false }
            lineStart = newline + 1
            index = lineStart
        }
        if buffer.count - lineStart > options.maximumMessageSize {
            endConnection(lineTooLong)
            return false
        }
        return true
    }

    /// Sends one line; false when it is over the limit (the connection is closing).
    @discardableResult
    private func sendLine(from start: Int, to end: Int) -> Bool {
        let count = end - start
        if count > options.maximumMessageSize {
            endConnection(lineTooLong)
            return false
        }
        let valid = UTF8Validator.isValid(UnsafeRawBufferPointer(start: buffer.base + start, count: count))
        send(valid ? .text : .binary, from: start, count: count)
        return true
    }

    private var lineTooLong: ClosePayload {
        let limit = ByteCount.text(UInt64(options.maximumMessageSize))
        return ClosePayload(code: .internalError, reason: Array("output line exceeds \(limit)".utf8))
    }

    private func send(_ opcode: Opcode, from start: Int, count: Int) {
        driver?.send(opcode, fin: true, buffer.base + start, count: count, in: buffer)
    }

    // MARK: - Endings

    /// The child exited and its output is all sent: Close with what its status says.
    private func closeIfChildDone() {
        guard stdoutEnded, let ended = child.termination, !clientGone, sentClose == nil else { return }
        let payload = ExecBridge.closePayload(for: ended)
        sentClose = payload
        stopGraceTimer()
        driver?.close(payload)
        child.endGroup()
    }

    static func closePayload(for ended: ChildTermination) -> ClosePayload {
        ended.isSuccess ? ClosePayload(code: .normalClosure)
                        : ClosePayload(code: .internalError, reason: Array(ended.description.utf8))
    }

    /// The grace after the client's Close is over and the child's output has not ended:
    /// the answer says so (or what the child's status says, when only what is left of its
    /// group still holds the output). The group's SIGTERM, scheduled at the Close, is due
    /// at the same moment.
    private func graceOver() {
        graceTimer = nil
        guard !clientGone, sentClose == nil else { return }
        endConnection(child.termination.map(ExecBridge.closePayload(for:))
                      ?? ClosePayload(code: .internalError, reason: Array("program did not exit".utf8)))
    }

    private func stopGraceTimer() {
        if let graceTimer { child.loop.arm(graceTimer, at: nil) }
        graceTimer = nil
    }

    /// Ends the connection for a reason of ours, and the child with it.
    private func endConnection(_ payload: ClosePayload) {
        guard sentClose == nil else { return }
        sentClose = payload
        stopGraceTimer()
        driver?.close(payload)
        clientGone = true
        clientClosed = true
        buffer.count = lineStart
        child.endGroup()
        readStdout()
    }

    /// The client closed: its stdin closes once what it sent is written, and the child's
    /// output goes on until the child exits (`closeIfChildDone` answers) or the grace passes
    /// (`graceOver`). The driver waits for that answer (`answersCloseItself`).
    public func connection(_ connection: ConnectionDriver, didReceiveClose payload: ClosePayload) {
        // Our own Close's answer, or a driver that echoed it already: the client is gone.
        guard !clientClosed, connection.state == .closeReceived else { return clientLeft() }
        clientClosed = true
        if driver == nil && ending == nil { driver = connection }  // a Close pipelined before `begin`
        // SIGTERM at the end of the grace, when the answer goes if the child is still there.
        child.endGroup(closingStdin: toChild.isEmpty || stdinGone)
        let timer = child.loop.timer { [weak self] in self?.graceOver() }
        graceTimer = timer
        child.loop.arm(timer, at: Instant.now().adding(seconds: child.options.closeGrace))
        closeIfChildDone()
    }

    /// The client went while its messages wait for a child that does not read: the child is
    /// ended (after the grace); its stdin then fails, which unpauses the socket for the rest.
    public func connectionPeerShutDownWhilePaused(_ connection: ConnectionDriver) { clientLeft() }

    public func connection(_ connection: ConnectionDriver, didEnd ending: ConnectionEnding) {
        self.ending = ending
        driver = nil
        clientLeft()
        finishIfDone()
    }

    /// The client is gone (or going): what it sent reaches the child, then its stdin
    /// closes; the group is ended after the grace; stdout is drained and dropped.
    private func clientLeft() {
        guard !clientGone else { return }
        clientGone = true
        clientClosed = true
        stopGraceTimer()
        // Its stdin closes once what the client sent is written (`writeStdin`).
        child.endGroup(closingStdin: toChild.isEmpty || stdinGone)
        updatePause()
        readStdout()
    }

    private func finishIfDone() {
        guard let ending, child.isFinished, let ended = child.termination, keepAlive != nil else { return }
        let done = onEnd
        onEnd = { _ in }
        keepAlive = nil
        done(ExecOutcome(connection: ending, child: ended, closeSent: sentClose))
    }
}
