// Outcome.verdict: the exit status and its line, one row of the man page's EXIT STATUS
// table at a time, and the precedence between them. No sockets: outcomes are built as facts.
import Glibc
import WebSocketCore
import WebSocketEngine
import WebSocketTransport
import XCTest
@testable import WSPipeBridge

final class OutcomeTests: XCTestCase {
    private func closed(_ code: UInt16? = nil, reason: String = "", byUs: Bool = false) -> ConnectionEnding {
        let received = ClosePayload(code: code.map { CloseCode(rawValue: $0) }, reason: Array(reason.utf8))
        return .closed(ClosingHandshake(initiatedByUs: byUs, sent: ClosePayload(code: .normalClosure), received: received))
    }

    /// A session that ended with `ending`, changed by `change`.
    private func outcome(_ ending: ConnectionEnding?, _ change: (inout Outcome) -> Void = { _ in }) -> Outcome {
        var outcome = Outcome()
        outcome.ending = ending
        change(&outcome)
        return outcome
    }

    private func notConnected(_ error: OpenError) -> Outcome {
        outcome(nil) {
            $0.connected = false
            $0.openError = error
        }
    }

    private func assertVerdict(_ outcome: Outcome, _ status: ExitStatus, _ line: String? = nil,
                               file: StaticString = #filePath, lineNumber: UInt = #line) {
        let verdict = outcome.verdict
        XCTAssertEqual(verdict.status, status, file: file, line: lineNumber)
        XCTAssertEqual(verdict.line, line, file: file, line: lineNumber)
    }

    // MARK: - Every row

    func testZeroCleanEnd() {
        assertVerdict(outcome(closed()), .success)
        assertVerdict(outcome(closed(1000)), .success)
        // Our 1001 (a signal, the reader gone) echoed back is normal too.
        assertVerdict(outcome(closed(1001, byUs: true)) { $0.localEnd = .readerGone }, .success)
        assertVerdict(outcome(.lost(.peerClosedTCP(afterOurClose: true))) { $0.localEnd = .readerGone }, .success,
                      nil)
    }

    func testStdoutFailingBetweenAttemptsEndsAsWhenConnected() {
        // --reconnect retrying when the reader left (or a write failed): not the last
        // attempt's failure (exit 3), but 0 as when connected (1 for a write error).
        let refused = OpenError.transport(.connect(target: "127.0.0.1:9", errno: ECONNREFUSED))
        var gone = notConnected(refused)
        gone.localEnd = .readerGone
        assertVerdict(gone, .success)
        var failed = notConnected(refused)
        failed.localEnd = .outputError
        assertVerdict(failed, .localError)
    }

    func testOneLocalError() {
        for end in [LocalEnd.inputError, .outputError, .decompressError] {
            assertVerdict(outcome(closed(1011, byUs: true)) { $0.localEnd = end }, .localError)  // said when it happened
        }
        assertVerdict(outcome(closed()) { $0.stdoutFailure = "cannot write to stdout: No space left on device" },
                      .localError, "cannot write to stdout: No space left on device")
    }

    func testOpenFailuresTwoThreeFourFiveNine() {
        assertVerdict(notConnected(.transport(.unixPathLength(path: "", limit: 107))), .usage,
                      "the Unix socket path '' is empty or longer than 107 bytes")
        assertVerdict(notConnected(.transport(.connect(target: "127.0.0.1:9", errno: ECONNREFUSED))), .cannotConnect,
                      "cannot connect to 127.0.0.1:9: Connection refused")
        XCTAssertEqual(notConnected(.transport(.tls(.wrongPassphrase(path: "k.pem")))).verdict.status, .tlsFailure)
        assertVerdict(notConnected(.handshakeLost(.closedMidAnswer)), .handshakeRejected,
                      "the server closed the connection in the middle of its handshake response")
        let proxy = ProxyURL(kind: .http, host: "127.0.0.1", port: 3128)
        let refused = ProxyFailure.refused(proxy: proxy, target: HostPort(host: "h", port: 80), status: 403,
                                           reason: "Forbidden", schemes: [])
        XCTAssertEqual(notConnected(.transport(.proxy(refused))).verdict.status, .proxyFailure)
    }

    func testSixProtocolViolationSaidWhenItHappened() {
        assertVerdict(outcome(.failed(.protocolError("a reserved opcode"))), .protocolViolation)
        assertVerdict(outcome(.failed(.invalidUTF8("x"))) { $0.connected = false }, .protocolViolation)
    }

    func testSevenConnectionLost() {
        assertVerdict(outcome(.lost(.peerClosedTCP(afterOurClose: false))), .connectionLost,
                      "connection lost: the server closed the TCP connection without a closing handshake")
        assertVerdict(outcome(.lost(.pingTimeout(seconds: 2))), .connectionLost,
                      "connection lost: no pong within 2 s (--ping-timeout): the connection is dead")
        assertVerdict(outcome(.timedOut(CloseWait(limit: 5, waited: 5.04, closeWritten: true))), .connectionLost,
                      "connection lost: no Close from the server: nothing came for 5 s (--close-timeout); gave up 5 s after the closing began")
        assertVerdict(outcome(.lost(.readFailed(.tlsSessionClosed))), .connectionLost,
                      "connection lost: the server closed the TLS session")
        assertVerdict(outcome(nil), .connectionLost, "connection lost: the connection ended without a closing handshake")
        assertVerdict(outcome(.lost(.abandoned)) { $0.stale = 30 }, .connectionLost,
                      "no message received for 30 s (--stale-timeout); the connection counts as dead")
    }

    func testEightClosedByPeer() {
        assertVerdict(outcome(closed(1008, reason: "policy")), .closedByPeer,
                      "the server closed the connection with 1008 (policy violation) \"policy\"")
        // Our code echoed is normal; another code in answer to ours is not.
        assertVerdict(outcome(closed(4000, byUs: true)), .closedByPeer, "the server closed the connection with 4000 (private application code)")
    }

    func testTenQueueFull() {
        assertVerdict(outcome(nil) {
            $0.connected = false
            $0.localEnd = .queueFull
            $0.queueBounds = (messages: 1000, bytes: 1 << 20)
        }, .queueFull, "the offline queue is full (1000 messages or 1 MiB) and --queue-policy is fail")
    }

    func testElevenCountNotReached() {
        assertVerdict(outcome(closed()) { $0.shortfall = Outcome.Shortfall(received: 2, required: 3) }, .countNotReached,
                      "the connection ended after 2 of 3 messages (--require-count)")
        assertVerdict(outcome(closed()) { $0.shortfall = Outcome.Shortfall(received: 0, required: 1) }, .countNotReached,
                      "the connection ended after 0 of 1 message (--require-count)")
    }

    func testElevenUntilNotMatchedUnlessTheCountCameFirst() {
        assertVerdict(outcome(closed()) { $0.untilShortfall = "id=7" }, .countNotReached,
                      "the connection ended before a message matched --until 'id=7' (--require-count)")
        assertVerdict(outcome(closed()) {
            $0.untilShortfall = "id=7"
            $0.countReached = true
        }, .success)  // -n came first
        assertVerdict(outcome(closed(byUs: true)) { $0.untilMatched = true }, .success)
    }

    func testThirteenExpectMissedSaidWhenItHappened() {
        assertVerdict(outcome(closed(byUs: true)) { $0.expectMissed = true }, .expectFailed)
        assertVerdict(outcome(closed(1001)) { $0.expectMissed = true }, .expectFailed)  // the server closed during the wait
        XCTAssertEqual(outcome(closed(byUs: true)) {
            $0.expectMissed = true
            $0.localEnd = .signal(2)
        }.verdict.status, .interrupted)  // a signal first
    }

    func testTwelveDeliveryUnconfirmedSaidWhenItHappened() {
        assertVerdict(outcome(closed()) { $0.deliveryConfirmed = false }, .deliveryUnconfirmed)
        assertVerdict(outcome(closed()) { $0.deliveryConfirmed = true }, .success)
    }

    /// Issue 35 item 7: --timeout's expiry is said (it exited 124 with nothing on stderr),
    /// as a notice that -q hides.
    func testTimeoutIs124WithANotice() {
        let line = "timed out after 5 s (--timeout)"
        assertVerdict(outcome(closed(byUs: true)) { $0.timedOut = 5 }, .timedOut, line)
        assertVerdict(outcome(nil) {
            $0.connected = false
            $0.timedOut = 0.5
        }, .timedOut, "timed out after 0.5 s (--timeout)")
        XCTAssertTrue(outcome(closed(byUs: true)) { $0.timedOut = 5 }.verdict.isNotice)
        XCTAssertFalse(outcome(.lost(.abandoned)).verdict.isNotice, "other endings are errors")
    }

    /// The one-connection client says --timeout ran out before its connection opened (the
    /// opening runs off the loop: the timer may end it before the dial's own deadline does).
    func testTheOneConnectionClientSaysATimeoutBeforeOpening() {
        assertVerdict(outcome(nil) {
            $0.connected = false
            $0.timedOut = 2
            $0.timedOutBeforeOpen = true
            $0.openError = .transport(.timedOut(.connecting(target: "127.0.0.1:9"), seconds: 10))
        }, .timedOut, "timed out after 2 s (--timeout) before the connection was open")
    }

    func testSignalsAre128PlusTheNumberWithoutALine() {
        for (number, status) in [(Int32(1), ExitStatus.hangup), (2, .interrupted), (15, .terminated)] {
            assertVerdict(outcome(closed(1001, byUs: true)) { $0.localEnd = .signal(number) }, status)
            XCTAssertEqual(status.rawValue, 128 + number)
        }
    }

    // MARK: - Precedence

    func testATimeoutAfterACleanCloseIs124() {
        assertVerdict(outcome(closed(byUs: true)) {
            $0.timedOut = 5
            $0.deliveryConfirmed = false
            $0.shortfall = Outcome.Shortfall(received: 0, required: 1)
        }, .timedOut, "timed out after 5 s (--timeout)")
    }

    func testASignalDuringTheBarrierWaitIsTheSignal() {
        assertVerdict(outcome(closed(1001, byUs: true)) {
            $0.localEnd = .signal(2)
            $0.deliveryConfirmed = false
        }, .interrupted)
        // ... also before a timeout and a lost connection.
        assertVerdict(outcome(.lost(.abandoned)) {
            $0.localEnd = .signal(15)
            $0.timedOut = 5
        }, .terminated)
    }

    func testCountShortfallBeatsAnUnconfirmedBarrier() {
        XCTAssertEqual(outcome(closed()) {
            $0.shortfall = Outcome.Shortfall(received: 1, required: 2)
            $0.deliveryConfirmed = false
        }.verdict.status, .countNotReached)
    }

    func testAnAbnormalCloseBeatsTheCountAndTheBarrier() {
        XCTAssertEqual(outcome(closed(1011)) {
            $0.shortfall = Outcome.Shortfall(received: 1, required: 2)
            $0.deliveryConfirmed = false
        }.verdict.status, .closedByPeer)
    }

    func testTheReaderGoneBeatsHowTheConnectionEnded() {
        assertVerdict(outcome(closed(1011)) { $0.localEnd = .readerGone }, .success)
        assertVerdict(outcome(.timedOut(CloseWait(limit: 1, waited: 1, closeWritten: false))) { $0.localEnd = .readerGone },
                      .success)
    }

    /// -n's count came and was written: whatever the server's Close says after it (its
    /// 1001 may come in the same read as the last messages, before our 1000), or the TCP
    /// connection dropped during the closing handshake, the run did what it was asked.
    func testTheCountReachedBeatsHowThePeerEndedAfterIt() {
        assertVerdict(outcome(closed(1001)) { $0.countReached = true }, .success)
        assertVerdict(outcome(closed(4000, byUs: true)) { $0.countReached = true }, .success)
        assertVerdict(outcome(.lost(.peerClosedTCP(afterOurClose: true))) { $0.countReached = true }, .success)
        assertVerdict(outcome(.timedOut(CloseWait(limit: 1, waited: 1, closeWritten: true))) { $0.countReached = true }, .success)
        // Not a protocol failure, a local error, a signal or --timeout: those are said as ever.
        XCTAssertEqual(outcome(.failed(.protocolError("x"))) { $0.countReached = true }.verdict.status, .protocolViolation)
        XCTAssertEqual(outcome(closed()) {
            $0.countReached = true
            $0.localEnd = .outputError
        }.verdict.status, .localError)
        XCTAssertEqual(outcome(closed(1001)) {
            $0.countReached = true
            $0.localEnd = .signal(SIGINT)
        }.verdict.status, .signal(SIGINT))
        XCTAssertEqual(outcome(closed()) {
            $0.countReached = true
            $0.timedOut = 5
        }.verdict.status, .timedOut)
    }

    func testQueueFullBeatsATimeoutAndAnOpenError() {
        XCTAssertEqual(outcome(nil) {
            $0.connected = false
            $0.localEnd = .queueFull
            $0.queueBounds = (messages: 1, bytes: 1)
            $0.timedOut = 5
            $0.openError = .handshakeLost(.closedMidAnswer)
        }.verdict.status, .queueFull)
    }

    func testTheLastOpenErrorCountsOnlyWhileDisconnected() {
        let refused = OpenError.transport(.connect(target: "h:1", errno: ECONNREFUSED))
        XCTAssertEqual(outcome(nil) {
            $0.connected = false
            $0.timedOut = 5
            $0.openError = refused
        }.verdict.status, .timedOut, "--timeout while retrying")
        XCTAssertEqual(outcome(closed()) { $0.openError = refused }.verdict.status, .success)
    }

    func testStaleBeatsAProtocolFailureAndATimeout() {
        XCTAssertEqual(outcome(.failed(.protocolError("x"))) {
            $0.stale = 5
            $0.timedOut = 5
        }.verdict.status, .connectionLost)
    }

    func testAProtocolFailureBeatsALocalErrorWhichBeatsATimeout() {
        XCTAssertEqual(outcome(.failed(.protocolError("x"))) {
            $0.localEnd = .inputError
            $0.timedOut = 5
        }.verdict.status, .protocolViolation)
        XCTAssertEqual(outcome(closed(byUs: true)) {
            $0.localEnd = .outputError
            $0.timedOut = 5
        }.verdict.status, .localError)
    }

    func testATimeoutBeatsAFailingStdout() {
        assertVerdict(outcome(closed(byUs: true)) {
            $0.timedOut = 5
            $0.stdoutFailure = "cannot write to stdout: Input/output error"
        }, .timedOut, "timed out after 5 s (--timeout)")
    }

    // MARK: - Serving

    func testTheOneshotServerNamesTheClient() {
        func served(_ ending: ConnectionEnding?) -> Outcome { outcome(ending) { $0.face = .oneshot } }
        assertVerdict(served(closed(1008, reason: "the server is slow")), .closedByPeer,
                      "the client closed the connection with 1008 (policy violation) \"the server is slow\"")
        assertVerdict(served(.timedOut(CloseWait(limit: 2, waited: 2, closeWritten: false))), .connectionLost,
                      "connection lost: the client stopped reading before our Close: nothing came for 2 s (--close-timeout); gave up 2 s after the closing began")
        assertVerdict(served(.lost(.peerClosedTCP(afterOurClose: true))), .connectionLost,
                      "connection lost: the client closed the TCP connection without answering our Close")
        assertVerdict(served(.lost(.writeFailed(.tlsSessionClosed))), .connectionLost,
                      "connection lost: cannot send: the client closed the TLS session")
        assertVerdict(outcome(closed()) {
            $0.face = .oneshot
            $0.shortfall = Outcome.Shortfall(received: 0, required: 1)
        }, .countNotReached, "the connection ended after 0 of 1 message (--require-count)")
    }

    func testAServiceEndsZeroUnlessALocalFailureOrASignal() {
        func service(_ change: (inout Outcome) -> Void) -> Outcome {
            outcome(.lost(.peerClosedTCP(afterOurClose: false))) {
                $0.face = .service
                change(&$0)
            }
        }
        assertVerdict(service { _ in }, .success)
        assertVerdict(service { $0.localEnd = .signal(15) }, .terminated)
        assertVerdict(service { $0.timedOut = 5 }, .success)
        assertVerdict(service { $0.localEnd = .inputError }, .localError)
        assertVerdict(service { $0.stdoutFailure = "cannot write to stdout: Broken pipe" }, .localError,
                      "cannot write to stdout: Broken pipe")
    }

    // MARK: - One ending alone (giving up on reconnecting, --oneshot's client)

    func testTheStatusOfAnEndingAlone() {
        XCTAssertEqual(Session.status(of: closed(), stale: false), .success)
        XCTAssertEqual(Session.status(of: closed(), stale: true), .connectionLost)
        XCTAssertEqual(Session.status(of: closed(1001), stale: false), .closedByPeer)
        XCTAssertEqual(Session.status(of: .failed(.protocolError("x")), stale: false), .protocolViolation)
        XCTAssertEqual(Session.status(of: .lost(.abandoned), stale: false), .connectionLost)
        XCTAssertEqual(Session.status(of: .timedOut(CloseWait(limit: 1, waited: 1, closeWritten: true)), stale: false),
                       .connectionLost)
    }
}
