// Conversation: the client's preamble and --until as a value without sockets, driven as the
// session drives it (a handshake, messages, the wait's timer, the connection's end).
import XCTest
@testable import WSPipeBridge

final class ConversationTests: XCTestCase {
    private func pattern(_ text: String) -> MessagePattern {
        do { return try MessagePattern.regex(text) } catch { fatalError("\(error)") }
    }

    /// --send auth --expect authenticated --send-file --expect subscribed, timeout 2 s.
    private func exchange(until: String? = nil) -> Conversation {
        var script = ConversationScript()
        script.steps = [.send("auth"), .expect(pattern("authenticated"), option: "--expect"), .sendFile,
                        .expect(pattern("subscribed"), option: "--expect-json")]
        script.expectTimeout = 2
        script.until = until.map(pattern)
        return Conversation(script)
    }

    /// What the message `text` matches, as the session's examiner says it.
    private func message(_ text: String) -> (MessagePattern) -> Bool {
        { $0.description == text }
    }

    func testStepsRunInCommandLineOrderAndEachWaitHoldsTheNext() {
        var conversation = exchange()
        XCTAssertEqual(conversation.connected(), [.send(step: 0), .startTimer(seconds: 2)])
        XCTAssertFalse(conversation.preambleDone)
        XCTAssertTrue(conversation.examines)
        XCTAssertEqual(conversation.received(message("other")), [], "a message that does not match changes nothing")
        XCTAssertEqual(conversation.received(message("authenticated")), [.stopTimer, .send(step: 2), .startTimer(seconds: 2)])
        XCTAssertEqual(conversation.received(message("authenticated")), [], "one message answers one wait")
        XCTAssertEqual(conversation.received(message("subscribed")), [.stopTimer, .complete])
        XCTAssertTrue(conversation.preambleDone)
        XCTAssertFalse(conversation.examines, "without --until nothing more is looked at")
    }

    func testSendsAloneCompleteAtOnceAndALoneExpectWaitsForAGreeting() {
        var sends = ConversationScript()
        sends.steps = [.sendFile, .send("a")]
        var conversation = Conversation(sends)
        XCTAssertEqual(conversation.connected(), [.send(step: 0), .send(step: 1), .complete], "--send-file before --send when given so")
        var greeting = ConversationScript()
        greeting.steps = [.expect(pattern("ready"), option: "--expect")]
        conversation = Conversation(greeting)
        XCTAssertEqual(conversation.connected(), [.startTimer(seconds: 10)])
        XCTAssertEqual(conversation.received(message("ready")), [.stopTimer, .complete])
        var empty = Conversation(ConversationScript())
        XCTAssertEqual(empty.connected(), [.complete], "no step: stdin flows at once")
    }

    func testATimeoutNamesTheStepAndItsPattern() {
        var conversation = exchange()
        _ = conversation.connected()
        _ = conversation.received(message("authenticated"))
        let miss = Conversation.Miss(step: "--expect-json #2", pattern: "subscribed", why: .timedOut(2))
        XCTAssertEqual(conversation.timerFired(), [.fail(miss)])
        XCTAssertFalse(conversation.preambleDone)
        XCTAssertTrue(conversation.missed)
        XCTAssertEqual(conversation.timerFired(), [], "once")
        XCTAssertEqual(conversation.received(message("subscribed")), [], "too late")
        XCTAssertEqual(miss.sentence(lastMessage: Array("tick\u{1B}[2J".utf8)),
                       #"--expect-json #2 'subscribed': no match within 2 s (--expect-timeout); the last message was 'tick\x1B[2J'"#)
        XCTAssertEqual(miss.sentence(lastMessage: nil),
                       "--expect-json #2 'subscribed': no match within 2 s (--expect-timeout); no text message came")
    }

    func testTheServerClosingDuringAWaitIsAMissWithItsCodeUnlessTheSessionEndedIt() {
        var conversation = exchange()
        _ = conversation.connected()
        let miss = Conversation.Miss(step: "--expect #1", pattern: "authenticated", why: .closed(code: 1001))
        XCTAssertEqual(conversation.connectionEnded(code: 1001, locally: false), [.stopTimer, .fail(miss)])
        XCTAssertEqual(miss.sentence(lastMessage: nil), "--expect #1 'authenticated': the server closed the connection with 1001 before a match")
        // The next connection starts afresh, from the first step.
        XCTAssertEqual(conversation.connected(), [.send(step: 0), .startTimer(seconds: 2)])
        XCTAssertFalse(conversation.missed)
        XCTAssertEqual(conversation.connectionEnded(code: nil, locally: true), [.stopTimer], "a signal or --timeout: no miss")
        XCTAssertFalse(conversation.missed)
        XCTAssertEqual(conversation.connectionEnded(code: nil, locally: false), [], "no wait under way")
    }

    func testUntilWatchesOnlyAfterThePreambleAndMatchesOnce() {
        var conversation = exchange(until: "reply")
        _ = conversation.connected()
        XCTAssertFalse(conversation.watchesUntil)
        XCTAssertEqual(conversation.received(message("reply")), [], "--until is not looked at during the preamble")
        _ = conversation.received(message("authenticated"))
        _ = conversation.received(message("subscribed"))
        XCTAssertTrue(conversation.watchesUntil)
        XCTAssertEqual(conversation.received(message("other")), [])
        XCTAssertEqual(conversation.received(message("reply")), [.untilMatched])
        XCTAssertEqual(conversation.received(message("reply")), [])
        XCTAssertTrue(conversation.preambleDone, "stdin's end still closes after --until's match")
    }
}
