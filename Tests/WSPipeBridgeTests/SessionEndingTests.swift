// SessionEnding: why a session is ending, and what each transition asks the session to do,
// with and without a connection. No sockets: the value is driven as the session drives it.
import WebSocketCore
import WebSocketTransport
import XCTest
@testable import WSPipeBridge

final class SessionEndingTests: XCTestCase {
    private let open = SessionEnding.Connection.open(closeSent: false)
    private let closing = SessionEnding.Connection.open(closeSent: true)
    private let goingAway = ClosePayload(code: .goingAway)
    private let normal = ClosePayload(code: .normalClosure)
    private let stdinError = ClosePayload(code: .internalError, reason: Array("stdin error".utf8))

    func testAFreshSessionIsNotEnding() {
        let ending = SessionEnding()
        XCTAssertNil(ending.localEnd)
        XCTAssertFalse(ending.endedByItself)
        XCTAssertFalse(ending.inputCloses(closesAtEndOfInput: true))
        XCTAssertFalse(ending.leftForNextConnection)
        XCTAssertTrue(ending.inputGoesOn)
        XCTAssertNil(ending.closeForNextConnection)
    }

    // MARK: - Signals

    func testASignalClosesTheConnectionWith1001EvenWhileStdoutHoldsTheClose() {
        var ending = SessionEnding()
        XCTAssertEqual(ending.signal(SIGINT, open), [.stopStdin, .releaseClose, .close(goingAway)])
        XCTAssertEqual(ending.localEnd, .signal(SIGINT))
        XCTAssertTrue(ending.endedByItself)
    }

    func testASignalWithoutAConnectionEndsTheRun() {
        var ending = SessionEnding()
        XCTAssertEqual(ending.signal(SIGTERM, .none), [.endWithoutConnection])
        XCTAssertEqual(ending.localEnd, .signal(SIGTERM))
    }

    func testASignalOverridesTheReaderLeavingButNotAFailure() {
        var readerGone = SessionEnding()
        _ = readerGone.outputFailed(.readerGone, open)
        _ = readerGone.signal(SIGINT, open)
        XCTAssertEqual(readerGone.localEnd, .signal(SIGINT))

        var failed = SessionEnding()
        _ = failed.outputFailed(.outputError, open)
        XCTAssertEqual(failed.signal(SIGINT, open), [.stopStdin, .releaseClose, .close(goingAway)])
        XCTAssertEqual(failed.localEnd, .outputError)
    }

    // MARK: - --timeout, --idle-timeout, -n, --stale-timeout

    func testTheTimeLimitClosesQuicklyOnce() {
        var ending = SessionEnding()
        XCTAssertEqual(ending.timeLimit(open), [.stopStdin, .cancelLinger, .releaseClose, .closeSoon(normal)])
        XCTAssertTrue(ending.timedOut)
        XCTAssertTrue(ending.endedByItself)
    }

    func testTheTimeLimitDuringAClosingHandshakeOnlyShortensIt() {
        var ending = SessionEnding()
        XCTAssertEqual(ending.timeLimit(closing), [.releaseClose, .closeSoon(normal)])
        XCTAssertFalse(ending.timedOut, "the Close was under way already: the run did not time out")
    }

    func testTheTimeLimitWithoutAConnectionEndsTheRun() {
        var ending = SessionEnding()
        XCTAssertEqual(ending.timeLimit(.none), [.endWithoutConnection])
        XCTAssertTrue(ending.timedOut)

        var afterAttempt = SessionEnding()
        afterAttempt.timeLimitPassedWhileDisconnected()
        XCTAssertTrue(afterAttempt.timedOut)
    }

    func testIdlenessClosesNormallyAndOnlyAConnection() {
        let ending = SessionEnding()
        XCTAssertEqual(ending.idle(open), [.stopStdin, .cancelLinger, .close(normal)])
        XCTAssertEqual(ending.idle(.none), [])
        XCTAssertEqual(ending, SessionEnding(), "idleness is not a reason the outcome reads")
    }

    func testTheCountClosesOnceAfterStdoutUnlessEndedLocally() {
        var ending = SessionEnding()
        XCTAssertEqual(ending.countReached(), [.stopStdin, .submitOutput, .closeUnlessEndedLocally(normal)])
        XCTAssertTrue(ending.countClosing)
        XCTAssertTrue(ending.endedByItself)
        XCTAssertEqual(ending.countReached(), [], "counted once")
    }

    func testUntilClosesOnceAfterStdoutAndEndsTheRun() {
        var ending = SessionEnding()
        XCTAssertEqual(ending.untilReached(), [.stopStdin, .submitOutput, .closeUnlessEndedLocally(normal)])
        XCTAssertTrue(ending.untilMatched)
        XCTAssertTrue(ending.endedByItself, "no reconnection after --until's match")
        XCTAssertEqual(ending.untilReached(), [], "matched once")
    }

    func testAnExpectMissClosesWithTheGivenCodeAndIsForgottenWhenARetryFollows() {
        var ending = SessionEnding()
        let code = ClosePayload(code: CloseCode(rawValue: 4000))
        XCTAssertEqual(ending.expectFailed(close: code, open), [.cancelLinger, .close(code)])
        XCTAssertTrue(ending.expectMissed)
        XCTAssertFalse(ending.endedByItself, "--reconnect may retry it")
        XCTAssertTrue(ending.inputGoesOn, "stdin stays for the next connection")
        XCTAssertEqual(ending.expectFailed(close: code, closing), [], "the server's Close came first")
        XCTAssertEqual(ending.expectFailed(close: code, .none), [])
        ending.connectionLeft()
        XCTAssertFalse(ending.expectMissed)
    }

    func testStalenessAbandonsTheConnectionUntilItHasLeft() {
        var ending = SessionEnding()
        XCTAssertEqual(ending.staleDetected(), [.abandon])
        XCTAssertTrue(ending.stale)
        XCTAssertFalse(ending.endedByItself, "a stale connection is retried")
        ending.connectionLeft()
        XCTAssertFalse(ending.stale)
    }

    // MARK: - Local failures

    func testOutputFailuresCloseWithTheirCodesAndTheFirstStays() {
        for (end, code) in [(LocalEnd.readerGone, CloseCode.goingAway), (.outputError, .internalError),
                            (.decompressError, .unsupportedData)] {
            var ending = SessionEnding()
            let actions = ending.outputFailed(end, open)
            XCTAssertEqual(actions, [.stopStdin, .close(SessionEnding.close(for: end))], "\(end)")
            XCTAssertEqual(SessionEnding.close(for: end).code, code)
            XCTAssertEqual(ending.localEnd, end)
            XCTAssertFalse(ending.inputGoesOn)
        }
        var ending = SessionEnding()
        _ = ending.outputFailed(.readerGone, open)
        XCTAssertEqual(ending.outputFailed(.outputError, open), [])
        XCTAssertEqual(ending.localEnd, .readerGone)
        XCTAssertEqual(ending.outputFailed(.decompressError, open).last, .close(SessionEnding.close(for: .decompressError)),
                       "a payload that does not inflate still closes with 1003")
    }

    func testTheReaderLeavingWithoutAConnectionEndsTheRun() {
        // --reconnect between attempts: the run sat retrying, its reader gone, until killed.
        var ending = SessionEnding()
        XCTAssertEqual(ending.outputFailed(.readerGone, .none), [.stopStdin, .endWithoutConnection])
        XCTAssertEqual(ending.localEnd, .readerGone)
        XCTAssertTrue(ending.endedByItself)
    }

    func testAnInputFailureClosesAfterDeliveryNowOrOnTheNextConnection() {
        var connected = SessionEnding()
        XCTAssertEqual(connected.inputFailed(open), [.stopStdin, .closeAfterDelivery(stdinError)])
        XCTAssertEqual(connected.localEnd, .inputError)
        XCTAssertNil(connected.closeForNextConnection)

        var disconnected = SessionEnding()
        XCTAssertEqual(disconnected.inputFailed(.none), [.stopStdin])
        XCTAssertEqual(disconnected.closeForNextConnection, stdinError)
        XCTAssertTrue(disconnected.leftForNextConnection, "its queued lines and Close go on the next connection")
        _ = disconnected.timeLimit(.none)
        XCTAssertFalse(disconnected.leftForNextConnection, "--timeout ends the run all the same")
    }

    func testAnInputFailureKeepsAnEarlierLocalEnd() {
        var ending = SessionEnding()
        _ = ending.outputFailed(.readerGone, open)
        _ = ending.inputFailed(open)
        XCTAssertEqual(ending.localEnd, .readerGone)
    }

    func testAFullFailQueueEndsTheRunOnce() {
        var ending = SessionEnding()
        XCTAssertEqual(ending.queueOverflowed(), [.stopStdin, .endWithoutConnection])
        XCTAssertEqual(ending.localEnd, .queueFull)
        XCTAssertEqual(ending.queueOverflowed(), [])

        var signalled = SessionEnding()
        _ = signalled.signal(SIGINT, .none)
        XCTAssertEqual(signalled.queueOverflowed(), [])
        XCTAssertEqual(signalled.localEnd, .signal(SIGINT))
    }

    // MARK: - stdin's end and its Close

    func testAskingForACloseOnStdinClosesAfterDelivery() {
        var ending = SessionEnding()
        let asked = ClosePayload(code: CloseCode(rawValue: 4000), reason: Array("bye".utf8))
        XCTAssertEqual(ending.closeAsked(asked, open), [.stopStdin, .closeAfterDelivery(asked)])
        XCTAssertTrue(ending.inputCloses(closesAtEndOfInput: false), "a Close asked for ends the run even with --no-close")
        XCTAssertFalse(ending.endedByItself)
    }

    func testAskingForACloseWhileDisconnectedKeepsTheFirstForTheNextConnection() {
        var ending = SessionEnding()
        let first = ClosePayload(code: CloseCode(rawValue: 4000))
        XCTAssertEqual(ending.closeAsked(first, .none), [.stopStdin])
        XCTAssertEqual(ending.closeAsked(ClosePayload(code: CloseCode(rawValue: 4001)), .none), [.stopStdin])
        XCTAssertEqual(ending.closeForNextConnection, first)
    }

    func testTheEndOfInputClosesAfterDeliveryOrAfterTheLinger() {
        let at = Instant.now()
        var ending = SessionEnding()
        XCTAssertEqual(ending.inputEnded(at: at, close: normal, linger: nil, open), [.closeAfterDelivery(normal)])
        XCTAssertEqual(ending.endOfInputAt, at)
        XCTAssertTrue(ending.inputCloses(closesAtEndOfInput: true))
        XCTAssertFalse(ending.inputCloses(closesAtEndOfInput: false))
        XCTAssertFalse(ending.inputGoesOn)

        var lingering = SessionEnding()
        XCTAssertEqual(lingering.inputEnded(at: at, close: normal, linger: 2, open), [.lingerThenClose(seconds: 2, normal)])
    }

    func testTheEndOfInputSendsNoSecondCloseAndNoneWithNoClose() {
        var closingAlready = SessionEnding()
        XCTAssertEqual(closingAlready.inputEnded(at: .now(), close: normal, linger: nil, closing), [])
        var noClose = SessionEnding()
        XCTAssertEqual(noClose.inputEnded(at: .now(), close: nil, linger: nil, open), [])
        XCTAssertNotNil(noClose.endOfInputAt)
        XCTAssertNil(noClose.closeForNextConnection)
    }

    func testTheEndOfInputWhileDisconnectedLeavesItsCloseForTheNextConnection() {
        var ending = SessionEnding()
        XCTAssertEqual(ending.inputEnded(at: .now(), close: normal, linger: nil, .none), [])
        XCTAssertEqual(ending.closeForNextConnection, normal)
        ending.closeNextConnection(goingAway)
        XCTAssertEqual(ending.closeForNextConnection, normal, "the first Close asked for stays")

        var retried = SessionEnding()
        retried.closeNextConnection(goingAway)
        XCTAssertEqual(retried.closeForNextConnection, goingAway)
        XCTAssertFalse(retried.leftForNextConnection, "only a stdin error leaves the run to the next connection")
    }

    // MARK: - The stdio server's clients

    func testTheNextClientCountsAfresh() {
        var ending = SessionEnding()
        _ = ending.countReached()
        _ = ending.timeLimit(open)
        ending.clientArrives()
        XCTAssertFalse(ending.countClosing)
        XCTAssertFalse(ending.timedOut)
        XCTAssertFalse(ending.endedByItself)
    }

    func testALocalEndOutlivesTheClient() {
        var ending = SessionEnding()
        _ = ending.signal(SIGHUP, open)
        ending.clientArrives()
        XCTAssertTrue(ending.endedByItself)
        XCTAssertFalse(ending.inputGoesOn)
    }
}
