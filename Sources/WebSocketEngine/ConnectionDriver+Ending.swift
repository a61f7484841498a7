import WebSocketCore
import WebSocketTransport

// MARK: - The ending's actions, carried out (`ConnectionClosing` decides)

extension ConnectionDriver {
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
