import WebSocketCore
import WebSocketTransport

// MARK: - The owner's calls that start an ending, and its actions carried out
// (`ConnectionClosing` decides)

extension ConnectionDriver {
    /// Starts the closing handshake after the messages already sent. A Close not yet
    /// written (waiting for `holdsClose`, or for the barrier ping) is replaced by this one.
    /// `within`: a hard limit in seconds for the whole ending, below the close timeout.
    public func close(_ payload: ClosePayload, within limit: Double? = nil) {
        let closeSent = core.closeSent != nil || ended != nil
        carryOut(closing.close(payload, within: limit, closeSent: closeSent,
                               now: .now()))
    }

    /// Closes once the peer has read everything sent so far: a Ping goes behind the
    /// messages, and the Close follows its Pong (§5.5.2: pongs answer in order). Without a
    /// Pong within the close timeout the Close goes anyway, with a short wait for its echo.
    public func closeAfterDelivery(_ payload: ClosePayload) {
        guard ended == nil,
              let action = closing.closeAfterDelivery(payload, closeSent: core.closeSent != nil, waitingEmpty: waiting.isEmpty,
                                                      totalQueued: outbound.totalQueued, now: .now()) else { return }
        carryOut(action)
        scheduleService()
    }

    /// Ends the connection at the latest `seconds` from now, whatever is under way (the
    /// time reading is paused counts here, unlike for the close timeout): for an owner that
    /// has stopped reading and whose ending must not wait for it.
    public func limitEnding(within seconds: Double) {
        closing.limit(within: seconds, now: .now())
        scheduleService()
    }

    /// The Close, ours or the core's echo of the peer's, goes only after every waiting
    /// message is framed (nothing follows a Close).
    func releaseQueuedClose() {
        carryOut(closing.closeIfReady(waitingEmpty: waiting.isEmpty, held: holdsClose, peerClosed: core.closeReceived != nil,
                                       totalQueued: outbound.totalQueued))
    }

    func queueBarrierIfReady() {
        carryOut(closing.barrierIfReady(waitingEmpty: waiting.isEmpty, totalQueued: outbound.totalQueued))
    }

    /// Carries out what a transition of the ending asks for.
    func carryOut(_ action: ConnectionClosing.Action) {
        switch action {
        case .none:
            return
        case .queueBarrierPing:
            if core.ping(barrierPayload) {
                closing.barrierPingQueued(now: .now())
                delegate?.connection(self, note: .barrierQueued)
                queueControlFrames()
            } else {
                carryOut(closing.barrierPingRefused())
            }
        case .queueClose(let payload):
            core.close(payload)
            delegate?.connection(self, note: .closeQueued(payload))
            queueControlFrames()
            closing.closeQueued(totalQueued: outbound.totalQueued)
        case .releaseEcho:
            queueControlFrames()
        case .service:
            scheduleService()
        case .barrierUnanswered(let waited):
            delegate?.connection(self, note: .barrierUnanswered(waited: waited, messages: messagesSent))
            scheduleService()
        }
    }

    /// The peer sent something after the barrier ping: progress, for a while.
    @inline(never)
    func receivedAfterBarrier() {
        closing.peerSent(now: .now())
    }

    /// The peer's Close arrived. Out of line: once per connection, and its body inlined into
    /// `processReceived` cost that loop 2 instructions per message (scripts/profile).
    @inline(never)
    func peerClosed(_ payload: ClosePayload, delegate: ConnectionDelegate) {
        delegate.connection(self, didReceiveClose: payload)
        carryOut(closing.peerClosed(ownerAnswers: core.state == .closeReceived, waitingEmpty: waiting.isEmpty,
                                    totalQueued: outbound.totalQueued, now: .now()))
    }
}
