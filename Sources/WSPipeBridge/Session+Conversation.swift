import WebSocketCore
import WebSocketEngine
import WebSocketTransport

extension Session {
    // MARK: - The client's conversation (--send, --send-file, --expect, --until)

    /// The assembler's examiner: a message, before it is written, goes to the conversation
    /// (binary ones never match). Returns whether it is written (--print-match-only: only
    /// --until's match). What the conversation decides is carried out once the writer is
    /// done with the message (`conversationDecided`).
    func examine(_ kind: MessageKind, _ payload: UnsafeRawBufferPointer) -> Bool {
        let printsAll = !config.client.conversation.printMatchOnly
        guard conversation.examines else { return printsAll }
        if kind == .text && !conversation.watchesUntil { lastSeen = Array(payload.prefix(Conversation.shownBytes)) }
        let actions = conversation.received { kind == .text && $0.matches(text: payload) }
        conversationActions += actions
        return printsAll || actions.contains(.untilMatched)
    }

    /// Carries out what the conversation decided about the message just written. Not
    /// inlined: every received message passes the check that calls it (scripts/profile).
    @inline(never)
    func conversationDecided() {
        let actions = conversationActions
        conversationActions = []
        converse(actions)
    }

    /// The connection ended: a wait under way is a miss, unless the session ended it.
    func conversationEnded(_ connectionEnding: ConnectionEnding) {
        var code: UInt16?
        if case .closed(let handshake) = connectionEnding { code = handshake.received.code?.rawValue }
        converse(conversation.connectionEnded(code: code, locally: ending.endedByItself))
    }

    /// An --expect missed on the connection that just ended (the reconnecting runner counts
    /// it as a failed attempt).
    var preambleMissed: Bool { ending.expectMissed }

    /// Says a miss the reconnecting runner held back as the run's last word (no retry
    /// follows): the one-shot client's line, an error.
    func sayUnsaidMiss() {
        guard let line = unsaidMiss else { return }
        unsaidMiss = nil
        say(.expectMissed(line: line))
    }

    /// Carries out a conversation transition's actions, in order.
    func converse(_ actions: [Conversation.Action]) {
        for action in actions {
            switch action {
            case .send(let index): sendStep(index)
            case .startTimer(let seconds):
                lastSeen = nil
                let timer = expectTimer ?? loop.timer { [unowned self] in converse(conversation.timerFired()) }
                expectTimer = timer
                loop.arm(timer, at: Instant.now().adding(seconds: seconds))
            case .stopTimer:
                if let expectTimer { loop.arm(expectTimer, at: nil) }
            case .complete:
                if !conversation.script.steps.isEmpty { emit(.resubscribed(messages: Int(preambleSent))) }
                preambleSent = 0
                hooks.preambleDone?()
                refreshStdin()
            case .fail(let miss):
                if let expectTimer { loop.arm(expectTimer, at: nil) }
                let line = miss.sentence(lastMessage: lastSeen)
                if config.client.reconnect != nil { unsaidMiss = line } else { say(.expectMissed(line: line)) }
                emit(.expectFailed(miss, lastMessage: lastSeen))
                preambleSent = 0
                carryOut(ending.expectFailed(close: endOfInputClose, connection))
            case .untilMatched:
                log.event("received the message --until waits for; closing")
                stdout.assembler.limit = stdout.assembler.messages  // nothing after it is written
                carryOut(ending.untilReached())
            }
        }
    }

    /// A --send or the --send-file, on the current connection.
    private func sendStep(_ index: Int) {
        guard let driver else { return }
        let before = sent.messages
        switch conversation.script.steps[index] {
        case .send(let text):
            let bytes = Array(text.utf8)
            driver.send(.text, bytes: bytes)
            sent.messages += 1
            sent.bytes += UInt64(bytes.count)
        case .sendFile:
            if let file = config.client.sendFile { sendFile(file, into: driver) }
        case .expect:
            return
        }
        preambleSent += sent.messages - before
    }
}
