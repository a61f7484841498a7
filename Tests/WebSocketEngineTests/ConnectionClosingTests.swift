import WebSocketCore
@testable import WebSocketEngine
import WebSocketTransport
import XCTest

/// The ending's state machine without sockets: every transition and the timeout rules of
/// docs/DESIGN.md "Ending" and the man page's CLOSING, on instants given by the test.
final class ConnectionClosingTests: XCTestCase {
    private let start = Instant(nanoseconds: 1_000_000_000_000)
    private func at(_ seconds: Double) -> Instant { start.adding(seconds: seconds) }
    private let normal = ClosePayload(code: .normalClosure)
    private let away = ClosePayload(code: .goingAway)

    private func opened(timeout: Double = 5) -> ConnectionClosing { ConnectionClosing(closeTimeout: timeout) }

    func testOpenHasNoDeadlineAndAcceptsData() {
        let closing = opened()
        XCTAssertEqual(closing.phase, .open)
        XCTAssertTrue(closing.acceptsData)
        XCTAssertNil(closing.nextDeadline)
        XCTAssertFalse(closing.isOverdue(at: at(1e6)))
    }

    func testOurCloseWaitsForTheQueueAndTheHoldThenGoes() {
        var closing = opened()
        XCTAssertEqual(closing.close(normal, within: nil, closeSent: false, now: start), .service)
        XCTAssertEqual(closing.phase, .closePending(normal))
        XCTAssertFalse(closing.acceptsData)
        XCTAssertEqual(closing.progressDeadline, at(5))
        XCTAssertNil(closing.hardDeadline)
        XCTAssertEqual(closing.closeIfReady(waitingEmpty: false, held: false, peerClosed: false, totalQueued: 10), .none)
        XCTAssertEqual(closing.closeIfReady(waitingEmpty: true, held: true, peerClosed: false, totalQueued: 10), .none)
        XCTAssertEqual(closing.closeIfReady(waitingEmpty: true, held: false, peerClosed: false, totalQueued: 10), .queueClose(normal))
        XCTAssertEqual(closing.phase, .closing)
        XCTAssertEqual(closing.endingMark, 10)
        closing.closeQueued(totalQueued: 18)
        XCTAssertEqual(closing.closeWrittenMark, 18)
        XCTAssertTrue(closing.weStartedClose)
    }

    func testAnotherCloseBeforeOursIsQueuedReplacesItWithoutRestartingTheClock() {
        var closing = opened()
        _ = closing.close(normal, within: nil, closeSent: false, now: start)
        _ = closing.close(away, within: nil, closeSent: false, now: at(3))
        XCTAssertEqual(closing.phase, .closePending(away))
        XCTAssertEqual(closing.progressDeadline, at(5), "a replacement is no progress")
        XCTAssertEqual(closing.since, start)
    }

    func testCloseWithinCapsTheEndingAndTheSmallerLimitWins() {
        var closing = opened()
        _ = closing.close(normal, within: 2, closeSent: false, now: start)
        XCTAssertEqual(closing.hardDeadline, at(2))
        XCTAssertEqual(closing.nextDeadline, at(2))
        _ = closing.close(normal, within: 4, closeSent: false, now: start)
        XCTAssertEqual(closing.hardDeadline, at(2))
        XCTAssertFalse(closing.isOverdue(at: at(1.9)))
        XCTAssertTrue(closing.isOverdue(at: at(2)))
    }

    func testCloseAfterOursWasSentOnlyAppliesItsLimit() {
        var closing = opened()
        _ = closing.close(normal, within: nil, closeSent: false, now: start)
        _ = closing.closeIfReady(waitingEmpty: true, held: false, peerClosed: false, totalQueued: 0)
        XCTAssertEqual(closing.close(away, within: 1, closeSent: true, now: at(1)), .service)
        XCTAssertEqual(closing.phase, .closing)
        XCTAssertEqual(closing.hardDeadline, at(2))
    }

    func testNoProgressForTheCloseTimeoutEndsAndWritingOurBytesIsProgress() {
        var closing = opened(timeout: 1)
        _ = closing.close(normal, within: nil, closeSent: false, now: start)
        // Until the Close is queued every byte written is progress.
        closing.wrote(from: 1_000_000, now: at(0.8))
        XCTAssertEqual(closing.progressDeadline, at(1.8))
        _ = closing.closeIfReady(waitingEmpty: true, held: false, peerClosed: false, totalQueued: 100)
        closing.wrote(from: 50, now: at(1.5))
        XCTAssertEqual(closing.progressDeadline, at(2.5), "bytes from before the Close")
        closing.wrote(from: 100, now: at(2))
        XCTAssertEqual(closing.progressDeadline, at(2.5), "the Close itself is not progress")
        XCTAssertFalse(closing.isOverdue(at: at(2.4)))
        XCTAssertTrue(closing.isOverdue(at: at(2.5)))
        let ending = closing.end(failure: nil, closeSent: normal, closeReceived: nil, totalWritten: 99, now: at(2.5))
        XCTAssertEqual(ending, .timedOut(CloseWait(limit: 1, waited: 2.5, closeWritten: false)))
    }

    func testWaitingOfOursIsProgressOnlyDuringAnEnding() {
        var closing = opened()
        closing.progressed(at: at(10))
        XCTAssertNil(closing.progressDeadline)
        _ = closing.close(normal, within: nil, closeSent: false, now: start)
        closing.progressed(at: at(4))  // a held Close, paused reading
        XCTAssertEqual(closing.progressDeadline, at(9))
    }

    func testBarrierPingGoesBehindTheMessagesAndItsPongReleasesTheClose() {
        var closing = opened()
        XCTAssertEqual(closing.closeAfterDelivery(normal, closeSent: false, waitingEmpty: false, totalQueued: 0, now: start),
                       ConnectionClosing.Action.none)
        XCTAssertEqual(closing.phase, .barrier(close: normal, pingQueued: false))
        XCTAssertFalse(closing.acceptsData)
        XCTAssertEqual(closing.barrierIfReady(waitingEmpty: false, totalQueued: 10), .none)
        XCTAssertEqual(closing.barrierIfReady(waitingEmpty: true, totalQueued: 40), .queueBarrierPing)
        XCTAssertEqual(closing.endingMark, 40)
        XCTAssertEqual(closing.barrierIfReady(waitingEmpty: true, totalQueued: 50), .none, "one ping")
        closing.barrierPingQueued(now: at(1))
        XCTAssertEqual(closing.barrierAnswered(now: at(2)), .service)
        XCTAssertEqual(closing.phase, .closePending(normal))
        XCTAssertEqual(closing.progressDeadline, at(7))
        XCTAssertFalse(closing.weStartedClose, "ours only once our Close reaches the core")
        XCTAssertEqual(closing.closeIfReady(waitingEmpty: true, held: false, peerClosed: false, totalQueued: 0),
                       .queueClose(normal))
        XCTAssertTrue(closing.weStartedClose)
        XCTAssertNil(closing.closeAfterDelivery(away, closeSent: false, waitingEmpty: true, totalQueued: 0, now: at(3)))
    }

    func testBarrierWhenTheCoreRefusesThePingClosesAtOnce() {
        var closing = opened()
        XCTAssertEqual(closing.closeAfterDelivery(normal, closeSent: false, waitingEmpty: true, totalQueued: 0, now: start),
                       .queueBarrierPing)
        XCTAssertEqual(closing.barrierPingRefused(), .service)
        XCTAssertEqual(closing.phase, .closePending(normal))
    }

    func testCloseDuringTheBarrierReplacesIt() {
        var closing = opened()
        _ = closing.closeAfterDelivery(normal, closeSent: false, waitingEmpty: true, totalQueued: 0, now: start)
        closing.barrierPingQueued(now: start)
        _ = closing.close(away, within: nil, closeSent: false, now: at(1))
        XCTAssertEqual(closing.phase, .closePending(away))
        XCTAssertNil(closing.incomingCountsUntil)
        XCTAssertEqual(closing.progressDeadline, at(6))
        XCTAssertEqual(closing.since, start)
    }

    func testUnansweredBarrierGivesUpAfterTheCloseTimeoutWithAShortWaitForTheEcho() {
        var closing = opened(timeout: 2)
        _ = closing.closeAfterDelivery(normal, closeSent: false, waitingEmpty: true, totalQueued: 0, now: start)
        closing.barrierPingQueued(now: start)
        XCTAssertEqual(closing.checkBarrier(now: at(1.9)), .none)
        XCTAssertEqual(closing.checkBarrier(now: at(2)), .barrierUnanswered(waited: 2))
        XCTAssertEqual(closing.phase, .closePending(normal))
        XCTAssertNil(closing.progressDeadline)
        XCTAssertNil(closing.incomingCountsUntil)
        XCTAssertEqual(closing.hardDeadline, at(3), "min(close timeout, 1 s) for the Close's echo")
        XCTAssertEqual(closing.checkBarrier(now: at(2.5)), .none)
    }

    func testDataFromThePeerAfterTheBarrierPingIsProgressForAtMostTenCloseTimeouts() {
        var closing = opened(timeout: 1)
        _ = closing.closeAfterDelivery(normal, closeSent: false, waitingEmpty: true, totalQueued: 0, now: start)
        closing.barrierPingQueued(now: start)
        XCTAssertEqual(closing.incomingCountsUntil, at(10))
        closing.peerSent(now: at(0.5))
        XCTAssertEqual(closing.progressDeadline, at(1.5))
        closing.peerSent(now: at(9.5))
        XCTAssertEqual(closing.progressDeadline, at(10), "capped at 10 close timeouts from the ping")
        closing.peerSent(now: at(10))
        XCTAssertEqual(closing.progressDeadline, at(10))
        XCTAssertEqual(closing.checkBarrier(now: at(10)), .barrierUnanswered(waited: 10))
    }

    func testPeerSentNeverShortensTheDeadline() {
        var closing = opened(timeout: 1)
        _ = closing.closeAfterDelivery(normal, closeSent: false, waitingEmpty: true, totalQueued: 0, now: start)
        closing.barrierPingQueued(now: start)
        closing.progressed(at: at(5))  // reading was paused: deadline at 6
        closing.peerSent(now: at(4.5))
        XCTAssertEqual(closing.progressDeadline, at(6))
    }

    func testPeersCloseEchoedByTheCoreEndsData() {
        var closing = opened()
        let action = closing.peerClosed(ownerAnswers: false, waitingEmpty: true, totalQueued: 30, now: start)
        XCTAssertEqual(action, .none)
        XCTAssertEqual(closing.phase, .closing)
        XCTAssertFalse(closing.echoPending)
        XCTAssertFalse(closing.acceptsData)
        XCTAssertEqual(closing.endingMark, 30)
        XCTAssertEqual(closing.progressDeadline, at(5))
        let ending = closing.end(failure: nil, closeSent: normal, closeReceived: normal, totalWritten: 0, now: at(1))
        XCTAssertEqual(ending, .closed(ClosingHandshake(initiatedByUs: false, sent: normal, received: normal)))
    }

    /// The regression: the echo went ahead of messages sent before the peer's Close and still
    /// unframed (over the queue limit), which were dropped (an echo server's last answers).
    func testTheCoresEchoOfThePeersCloseWaitsBehindUnframedMessagesWhichAreKept() {
        var closing = opened()
        XCTAssertEqual(closing.peerClosed(ownerAnswers: false, waitingEmpty: false, totalQueued: 30, now: start), .none)
        XCTAssertTrue(closing.echoPending && !closing.acceptsData)
        XCTAssertEqual(closing.endingMark, .max, "writing what the echo waits behind is progress")
        closing.wrote(from: 1000, now: at(4))
        XCTAssertEqual(closing.progressDeadline, at(9))
        XCTAssertEqual(closing.closeIfReady(waitingEmpty: false, held: false, peerClosed: true, totalQueued: 40), .none)
        XCTAssertEqual(closing.closeIfReady(waitingEmpty: true, held: true, peerClosed: true, totalQueued: 50), .releaseEcho,
                       "the owner's hold is for its own Close, not the core's echo")
        XCTAssertEqual(closing.phase, .closing)
        XCTAssertEqual(closing.endingMark, 50)
        XCTAssertEqual(closing.closeIfReady(waitingEmpty: true, held: false, peerClosed: true, totalQueued: 50), .none)
        let ending = closing.end(failure: nil, closeSent: normal, closeReceived: normal, totalWritten: 50, now: at(5))
        XCTAssertEqual(ending, .closed(ClosingHandshake(initiatedByUs: false, sent: normal, received: normal)))
    }

    /// Our Close waiting behind messages when the peer's comes: the core echoes the peer's
    /// (ours is never sent), and the echo waits behind the same messages.
    func testThePeersCloseWhileOursWaitsBehindMessagesHoldsTheEchoBehindThem() {
        var closing = opened()
        _ = closing.close(away, within: nil, closeSent: false, now: start)
        XCTAssertEqual(closing.peerClosed(ownerAnswers: false, waitingEmpty: false, totalQueued: 0, now: at(1)), .none)
        XCTAssertEqual(closing.phase, .echoPending)
        XCTAssertEqual(closing.closeIfReady(waitingEmpty: true, held: false, peerClosed: true, totalQueued: 9), .releaseEcho)
        XCTAssertFalse(closing.weStartedClose)
    }

    func testPeersCloseAfterOursCompletesAHandshakeWeStarted() {
        var closing = opened()
        _ = closing.close(away, within: nil, closeSent: false, now: start)
        _ = closing.closeIfReady(waitingEmpty: true, held: false, peerClosed: false, totalQueued: 0)
        _ = closing.peerClosed(ownerAnswers: false, waitingEmpty: true, totalQueued: 0, now: at(1))
        XCTAssertEqual(closing.since, start)
        let ending = closing.end(failure: nil, closeSent: away, closeReceived: away, totalWritten: 8, now: at(1))
        XCTAssertEqual(ending, .closed(ClosingHandshake(initiatedByUs: true, sent: away, received: away)))
    }

    func testOwnerAnsweredCloseKeepsDataFlowingUntilTheAnswer() {
        var closing = opened()
        let action = closing.peerClosed(ownerAnswers: true, waitingEmpty: true, totalQueued: 0, now: start)
        XCTAssertEqual(action, .none)
        XCTAssertEqual(closing.phase, .ownerAnswers)
        XCTAssertTrue(closing.acceptsData, "a program's output after its client closed still goes")
        closing.progressed(at: at(20))  // the driver counts the wait for the answer as progress
        XCTAssertEqual(closing.progressDeadline, at(25))
        _ = closing.close(normal, within: nil, closeSent: false, now: at(21))
        XCTAssertEqual(closing.phase, .closePending(normal))
        XCTAssertEqual(closing.closeIfReady(waitingEmpty: true, held: false, peerClosed: true, totalQueued: 0), .queueClose(normal))
        XCTAssertFalse(closing.weStartedClose, "the owner's answer to the peer's Close")
    }

    func testOwnerAnsweredCloseDuringTheBarrierSendsTheBarriersCloseWithoutWaitingForThePong() {
        var closing = opened()
        _ = closing.closeAfterDelivery(away, closeSent: false, waitingEmpty: true, totalQueued: 0, now: start)
        closing.barrierPingQueued(now: start)
        XCTAssertEqual(closing.peerClosed(ownerAnswers: true, waitingEmpty: true, totalQueued: 0, now: at(1)), .service)
        XCTAssertEqual(closing.phase, .closePending(away))
        XCTAssertFalse(closing.weStartedClose)
    }

    func testEndOfInputAfterThePeersOwnerAnsweredClose() {
        var closing = opened()
        _ = closing.peerClosed(ownerAnswers: true, waitingEmpty: true, totalQueued: 0, now: start)
        XCTAssertEqual(closing.closeAfterDelivery(normal, closeSent: false, waitingEmpty: true, totalQueued: 0, now: at(1)),
                       .queueBarrierPing)
    }

    func testFailingTheConnectionWaitsAtMostOneSecondForThePeersClose() {
        var closing = opened(timeout: 5)
        closing.failed(now: start)
        XCTAssertEqual(closing.phase, .closing)
        XCTAssertFalse(closing.acceptsData)
        XCTAssertEqual(closing.hardDeadline, at(1))
        var short = opened(timeout: 0.3)
        short.failed(now: start)
        XCTAssertEqual(short.hardDeadline, at(0.3), "never beyond the close timeout")
        let failure = ReceiveError.invalidUTF8("test")
        XCTAssertEqual(closing.end(failure: failure, closeSent: nil, closeReceived: normal, totalWritten: 0, now: at(1)),
                       .failed(failure))
    }

    func testBothClosesExchangedWaitOneSecondForTCP() {
        var closing = opened(timeout: 5)
        _ = closing.close(normal, within: nil, closeSent: false, now: start)
        _ = closing.closeIfReady(waitingEmpty: true, held: false, peerClosed: false, totalQueued: 0)
        _ = closing.peerClosed(ownerAnswers: false, waitingEmpty: true, totalQueued: 0, now: at(1))
        closing.outputShutDown(now: at(2))
        XCTAssertEqual(closing.phase, .waitingForTCP)
        XCTAssertNil(closing.progressDeadline)
        XCTAssertEqual(closing.hardDeadline, at(3))
        XCTAssertFalse(closing.isOverdue(at: at(2.9)))
        XCTAssertTrue(closing.isOverdue(at: at(3)))
        var short = opened(timeout: 0.2)
        short.outputShutDown(now: start)
        XCTAssertEqual(short.hardDeadline, at(0.2))
    }

    func testLossKeepsTheFirstReasonAndEndsAsLost() {
        var closing = opened()
        closing.lose(.peerClosedTCP(afterOurClose: false))
        closing.lose(.abandoned)
        XCTAssertEqual(closing.end(failure: nil, closeSent: nil, closeReceived: nil, totalWritten: 0, now: start),
                       .lost(.peerClosedTCP(afterOurClose: false)))
        XCTAssertFalse(closing.acceptsData)
    }

    func testTimedOutSaysWhetherOurCloseWasWritten() {
        var closing = opened(timeout: 1)
        _ = closing.close(normal, within: nil, closeSent: false, now: start)
        _ = closing.closeIfReady(waitingEmpty: true, held: false, peerClosed: false, totalQueued: 0)
        closing.closeQueued(totalQueued: 8)
        XCTAssertEqual(closing.end(failure: nil, closeSent: normal, closeReceived: nil, totalWritten: 8, now: at(1)),
                       .timedOut(CloseWait(limit: 1, waited: 1, closeWritten: true)))
    }

    func testDeadlineIsTheSoonerOfTheTwo() {
        var closing = opened(timeout: 5)
        _ = closing.close(normal, within: 7, closeSent: false, now: start)
        XCTAssertEqual(closing.nextDeadline, at(5))
        closing.progressed(at: at(4))
        XCTAssertEqual(closing.nextDeadline, at(7))
    }

    // MARK: - Rules from the integration branch, ported into the state

    /// A Close from the peer behind the barrier's Pong (one read) comes before ours reaches
    /// the core: the core echoes it, and the handshake is the peer's (a 1011 from an --exec
    /// server is not our code echoed).
    func testAPeersCloseBehindTheBarrierPongIsTheirsNotOurs() {
        var closing = opened()
        _ = closing.closeAfterDelivery(normal, closeSent: false, waitingEmpty: true, totalQueued: 0, now: start)
        closing.barrierPingQueued(now: start)
        _ = closing.barrierAnswered(now: at(1))
        let error = ClosePayload(code: .internalError, reason: Array("exit status 3".utf8))
        XCTAssertEqual(closing.peerClosed(ownerAnswers: false, waitingEmpty: true, totalQueued: 0, now: at(1)), .none)
        XCTAssertEqual(closing.closeIfReady(waitingEmpty: true, held: false, peerClosed: true, totalQueued: 0), .none)
        XCTAssertEqual(closing.end(failure: nil, closeSent: error, closeReceived: error, totalWritten: 0, now: at(1)),
                       .closed(ClosingHandshake(initiatedByUs: false, sent: error, received: error)))
    }

    /// A Close the peer's came before, queued afterwards (the owner's answer, or a pending
    /// Close released after the peer's arrived), does not make the handshake ours.
    func testACloseQueuedAfterThePeersIsNotOurs() {
        var closing = opened()
        _ = closing.close(normal, within: nil, closeSent: false, now: start)
        XCTAssertEqual(closing.closeIfReady(waitingEmpty: true, held: false, peerClosed: true, totalQueued: 0),
                       .queueClose(normal))
        XCTAssertFalse(closing.weStartedClose)
    }

    /// A client that half-closes TCP after its Close, which the owner answers (--exec):
    /// the owner's output and answer are still written, then the connection ends.
    func testAPeersHalfCloseAfterItsOwnerAnsweredCloseStillGetsTheAnswer() {
        var closing = opened()
        _ = closing.peerClosed(ownerAnswers: true, waitingEmpty: true, totalQueued: 0, now: start)
        closing.peerEndedStream(closeReceived: true, ownerAnswers: true, closeSent: false)
        XCTAssertNil(closing.loss)
        XCTAssertTrue(closing.writesAfterPeersShutdown(ownerAnswers: true, outputShutDown: false, unwritten: false),
                      "the answer is still to come")
        XCTAssertTrue(closing.writesAfterPeersShutdown(ownerAnswers: false, outputShutDown: false, unwritten: true),
                      "the answer is queued, not written")
        XCTAssertFalse(closing.writesAfterPeersShutdown(ownerAnswers: false, outputShutDown: false, unwritten: false),
                       "all written: the peer's FIN came already")
        XCTAssertFalse(closing.writesAfterPeersShutdown(ownerAnswers: true, outputShutDown: true, unwritten: true),
                       "a write failed")
    }

    func testAResetAfterThePeersHalfCloseEndsAtOnce() {
        var closing = opened()
        closing.peerReset(closeSent: false)
        XCTAssertNil(closing.loss, "an error before any half-close is the read's to report")
        _ = closing.peerClosed(ownerAnswers: true, waitingEmpty: true, totalQueued: 0, now: start)
        closing.peerEndedStream(closeReceived: true, ownerAnswers: true, closeSent: false)
        closing.peerReset(closeSent: false)
        XCTAssertEqual(closing.loss, .peerClosedTCP(afterOurClose: false))
        XCTAssertFalse(closing.writesAfterPeersShutdown(ownerAnswers: true, outputShutDown: false, unwritten: true))
    }

    func testAnEndOfStreamBeforeThePeersCloseIsALossAndAfterAnEchoedOneNoHalfClose() {
        var lost = opened()
        lost.peerEndedStream(closeReceived: false, ownerAnswers: false, closeSent: true)
        XCTAssertEqual(lost.loss, .peerClosedTCP(afterOurClose: true))
        XCTAssertFalse(lost.peerShutDownAfterClose)
        var echoed = opened()
        _ = echoed.peerClosed(ownerAnswers: false, waitingEmpty: true, totalQueued: 0, now: start)
        echoed.peerEndedStream(closeReceived: true, ownerAnswers: false, closeSent: true)
        XCTAssertNil(echoed.loss)
        XCTAssertFalse(echoed.writesAfterPeersShutdown(ownerAnswers: false, outputShutDown: false, unwritten: true))
    }

    /// A half-close while the echo waits behind unframed messages: they and the echo are
    /// still written (the connection ends once nothing is unwritten).
    func testAPeersHalfCloseWhileItsEchoWaitsStillGetsTheMessagesAndTheEcho() {
        var closing = opened()
        _ = closing.peerClosed(ownerAnswers: false, waitingEmpty: false, totalQueued: 0, now: start)
        closing.peerEndedStream(closeReceived: true, ownerAnswers: false, closeSent: true)
        XCTAssertNil(closing.loss)
        XCTAssertTrue(closing.writesAfterPeersShutdown(ownerAnswers: false, outputShutDown: false, unwritten: true))
        XCTAssertEqual(closing.closeIfReady(waitingEmpty: true, held: false, peerClosed: true, totalQueued: 9), .releaseEcho)
        XCTAssertTrue(closing.writesAfterPeersShutdown(ownerAnswers: false, outputShutDown: false, unwritten: true))
        XCTAssertFalse(closing.writesAfterPeersShutdown(ownerAnswers: false, outputShutDown: false, unwritten: false))
    }

    /// `limitEnding(within:)`: a hard cap that neither paused reading (progress of ours)
    /// nor the peer's data extends.
    func testLimitIsAHardCapThatProgressDoesNotExtend() {
        var closing = opened(timeout: 2)
        _ = closing.closeAfterDelivery(normal, closeSent: false, waitingEmpty: true, totalQueued: 0, now: start)
        closing.barrierPingQueued(now: start)
        closing.limit(within: 2, now: at(1))
        closing.progressed(at: at(2.5))
        closing.peerSent(now: at(2.8))
        XCTAssertEqual(closing.hardDeadline, at(3))
        XCTAssertEqual(closing.nextDeadline, at(3))
        XCTAssertTrue(closing.isOverdue(at: at(3)))
        closing.limit(within: 5, now: at(2))
        XCTAssertEqual(closing.hardDeadline, at(3), "a later limit does not lift an earlier one")
    }

    /// The wait that ended at the bound on the peer's data after the barrier ping (the
    /// peer answered the Ping, then streams without answering our Close) is told from one
    /// that ended in silence (`CloseWait.peerKeptSending`).
    func testTheWaitEndedByThePeersDataBoundSaysThePeerKeptSending() {
        func answeredThenClosed() -> ConnectionClosing {
            var closing = opened(timeout: 1)
            _ = closing.closeAfterDelivery(normal, closeSent: false, waitingEmpty: true, totalQueued: 0, now: start)
            closing.barrierPingQueued(now: start)
            _ = closing.barrierAnswered(now: at(0.1))
            _ = closing.closeIfReady(waitingEmpty: true, held: false, peerClosed: false, totalQueued: 0)
            return closing
        }
        var streaming = answeredThenClosed()
        for tick in 1...40 { streaming.peerSent(now: at(Double(tick) * 0.25)) }
        XCTAssertFalse(streaming.isOverdue(at: at(9.9)))
        XCTAssertTrue(streaming.isOverdue(at: at(10)))
        XCTAssertEqual(streaming.end(failure: nil, closeSent: normal, closeReceived: nil, totalWritten: 0, now: at(10)),
                       .timedOut(CloseWait(limit: 1, waited: 10, closeWritten: false, peerKeptSending: true)))
        var silent = answeredThenClosed()
        silent.peerSent(now: at(0.5))
        XCTAssertTrue(silent.isOverdue(at: at(1.5)))
        XCTAssertEqual(silent.end(failure: nil, closeSent: normal, closeReceived: nil, totalWritten: 0, now: at(1.5)),
                       .timedOut(CloseWait(limit: 1, waited: 1.5, closeWritten: false, peerKeptSending: false)))
    }
}
